package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"seckill/internal/capacity"
	"seckill/internal/sale"
)

// run is a clean result line of a bench run with an API node and a worker node apart: requests,
// wins, and the CPU seconds each role used (the crowd's; the drain's are added to redis and the
// worker as extra to prove they count).
func run(name string, requests, wins int64, api, redis, worker, db float64) ResultLine {
	r := ResultLine{Scenario: name, Machine: "2 cores"}
	r.Requests, r.Wins, r.Stock, r.OK = requests, wins, wins, true
	r.Seconds, r.DrainS = 2, 0.5
	r.Setup = &Setup{Redis: "spawn", DB: "spawn:mariadb", Fsync: "always", Roles: []string{"api", "worker"}}
	r.CPU = []RoleCPU{
		{Role: "api", Processes: 1, CrowdS: api, BusiestS: api},
		{Role: "bench", Processes: 1, CrowdS: 99, BusiestS: 99},
		{Role: "database", Processes: 1, CrowdS: db, BusiestS: db},
		// Two Redis processes: the busiest is the item's master.
		{Role: "redis", Processes: 2, CrowdS: redis * 1.5, DrainS: redis * 0.5, BusiestS: redis},
		{Role: "worker", Processes: 1, CrowdS: worker / 2, DrainS: worker / 2, BusiestS: worker},
	}
	return r
}

func near(got, want float64) bool { return math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want)) }

func TestCostsOf(t *testing.T) {
	// Three all-win runs of 10,000 wins: API 1.5, 2 and 9 s (median 2 s: 200 µs a win).
	allwin := []ResultLine{
		run("allwin-a", 10_000, 10_000, 1.5, 1, 0.5, 0.4),
		run("allwin-b", 10_000, 10_000, 2, 0.8, 0.4, 0.5),
		run("allwin-c", 10_000, 10_000, 9, 1.2, 0.6, 0.6),
	}
	// A flash run: 40,000 requests, 500 wins; 500 × 200 µs of the API's 2.1 s went to the wins.
	flash := run("flash", 40_000, 500, 2.1, 0.05, 0.02, 0.02)
	// Runs that must not count, each with CPU figures that would show if they did.
	ignored := func() []ResultLine {
		var out []ResultLine
		for _, spoil := range []func(*ResultLine){
			func(r *ResultLine) { r.OK = false },
			func(r *ResultLine) { r.Fault = &FaultReport{Kind: "api"} },
			func(r *ResultLine) { r.Unanswered = 1 },
			func(r *ResultLine) { r.Restocked = 3 },
			func(r *ResultLine) { r.Line = &LineReport{} },
			func(r *ResultLine) { r.Setup = nil },
			func(r *ResultLine) { r.Setup.InProcess = true },
			func(r *ResultLine) { r.Setup.Roles = []string{"all"} },
			func(r *ResultLine) { r.Setup.Redis = "" },
			func(r *ResultLine) { r.Setup.MinReplicas = 1 },
		} {
			for _, r := range []ResultLine{run("spoilt", 10_000, 10_000, 500, 500, 500, 500), run("spoilt", 40_000, 500, 500, 500, 500, 500)} {
				s := *r.Setup
				r.Setup = &s
				spoil(&r)
				out = append(out, r)
			}
		}
		return out
	}()
	runs := append(append(ignored, allwin...), flash, run("neither", 1000, 600, 500, 500, 500, 500))
	c, err := CostsOf(runs, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		name      string
		got, want float64
	}{
		{"win", c.Win, 200e-6},
		{"grab (busiest master)", c.Grab, 100e-6},
		{"every redis process", c.RedisAll, 200e-6},
		{"place", c.Place, 50e-6},
		{"write", c.Write, 50e-6},
		{"loss", c.Loss, (2.1 - 500*200e-6) / 39_500},
		{"orders per second of a worker", c.OrdersPerS, 10_000 / 2.5},
	} {
		if !near(f.got, f.want) {
			t.Errorf("%s: %g s, want %g", f.name, f.got, f.want)
		}
	}
	if strings.Join(c.AllWinRuns, " ") != "allwin-a allwin-b allwin-c" || strings.Join(c.FlashRuns, " ") != "flash" || c.Machine != "2 cores" || !strings.HasPrefix(c.Setup, "Redis spawn, appendfsync always, min-replicas 0, database spawn:mariadb") {
		t.Errorf("costs from %v and %v on %q %+v", c.AllWinRuns, c.FlashRuns, c.Machine, c.Setup)
	}

	// The replicated runs are their own: asked for min-replicas 1, only they count.
	var r1 []ResultLine
	for _, r := range []ResultLine{run("allwin-r1", 10_000, 10_000, 3, 2, 0.5, 0.5), run("flash-r1", 40_000, 500, 3, 0.1, 0.1, 0.1)} {
		r.Setup.MinReplicas = 1
		r1 = append(r1, r)
	}
	c1, err := CostsOf(append(append(allwin, flash), r1...), 1)
	if err != nil {
		t.Fatal(err)
	}
	if !near(c1.Win, 300e-6) || !near(c1.Grab, 200e-6) || c1.AllWinRuns[0] != "allwin-r1" {
		t.Errorf("min-replicas 1: %+v", c1)
	}
}

func TestCostsOfRefuses(t *testing.T) {
	allwin, flash := run("allwin", 10_000, 10_000, 2, 1, 0.5, 0.5), run("flash", 40_000, 500, 2, 0.1, 0.1, 0.1)
	noAPI := run("allwin", 10_000, 10_000, 0, 1, 0.5, 0.5)
	noAPI.CPU = noAPI.CPU[1:]
	for name, runs := range map[string][]ResultLine{
		"nothing":              nil,
		"no flash":             {allwin},
		"no all-win":           {flash},
		"no API CPU":           {noAPI, flash},
		"other replicas only":  {withReplicas(allwin, 2), withReplicas(flash, 2)},
		"a fault in every run": {withFault(allwin), withFault(flash)},
	} {
		if _, err := CostsOf(runs, 0); !errors.Is(err, capacity.ErrNoRun) {
			t.Errorf("%s: err %v, want capacity.ErrNoRun", name, err)
		}
	}
}

func withReplicas(r ResultLine, n int) ResultLine {
	s := *r.Setup
	s.MinReplicas, r.Setup = n, &s
	return r
}

func withFault(r ResultLine) ResultLine {
	r.Fault = &FaultReport{Kind: "redis"}
	return r
}

// costs are round figures: one master takes 5,000 grabs/s at half a core, a worker 5,000 orders/s.

// TestTheProjectsResults sizes the design documents' sale from the results the repository holds.
func TestTheProjectsResults(t *testing.T) {
	f, err := os.Open("../../docs/bench/results.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	runs, err := ReadResults(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, replicas := range []int{0, 1} {
		c, err := CostsOf(runs, replicas)
		if err != nil {
			t.Fatalf("min-replicas %d: %v", replicas, err)
		}
		p, err := capacity.Size(capacity.Sale{Peak: 1_000_000, Users: 1_000_000, Stock: 1000, PerUser: 1, Kind: sale.KindItem,
			Drain: time.Minute, Cores: 8, Headroom: 0.6, MinReplicas: replicas}, c)
		if err != nil {
			t.Fatal(err)
		}
		if p.APINodes < 2 || p.Masters < 1 || p.RateNode < 1 || p.SellS <= 0 {
			t.Errorf("min-replicas %d: %+v", replicas, p)
		}
	}
}

func TestReadRuns(t *testing.T) {
	runs, err := ReadResults(strings.NewReader(`{"scenario":"a","requests":3}` + "\n\n" + `{"scenario":"b","cpu":[{"role":"api","crowd_cpu_s":1.5}]}` + "\n"))
	if err != nil || len(runs) != 2 || runs[0].Requests != 3 || runs[1].CPU[0].CrowdS != 1.5 {
		t.Fatalf("runs %+v, err %v", runs, err)
	}
	if _, err := ReadResults(strings.NewReader("{\"scenario\":\"a\"}\nnot json\n")); err == nil || !strings.Contains(err.Error(), "result line 2") {
		t.Fatalf("a bad line: err %v", err)
	}
}

func FuzzReadRuns(f *testing.F) {
	f.Add([]byte(`{"scenario":"a","requests":40000,"wins":500,"ok":true,"setup":{"redis":"spawn","roles":["api","worker"]},"cpu":[{"role":"api","crowd_cpu_s":2}]}`))
	f.Add([]byte("{}\n{\"wins\":-1}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		runs, err := ReadResults(bytes.NewReader(b))
		if err != nil {
			return
		}
		c, err := CostsOf(runs, 0)
		if err != nil {
			return
		}
		// Whatever the file says, a plan either is refused or holds its floors.
		p, err := capacity.Size(capacity.Sale{Peak: 1000, Users: 1000, Stock: 10, PerUser: 1, Kind: sale.KindItem, Cores: 8, Headroom: 0.5}, c)
		if err == nil && (p.APINodes < 2 || p.WorkerNodes < 2 || p.Shards < 1) {
			t.Fatalf("plan %+v from costs %+v", p, c)
		}
	})
}

var update = flag.Bool("update", false, "write measured.json from docs/bench/results.jsonl")

// TestMeasuredAreTheProjectsResults: the costs a node plans with are those of the project's bench
// runs, for each SECKILL_REDIS_MIN_REPLICAS they were measured with.
func TestMeasuredAreTheProjectsResults(t *testing.T) {
	f, err := os.Open("../../docs/bench/results.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	runs, err := ReadResults(f)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]capacity.Costs{}
	for _, replicas := range []int{0, 1} {
		if want[replicas], err = CostsOf(runs, replicas); err != nil {
			t.Fatal(err)
		}
	}
	if *update {
		b, err := json.MarshalIndent(want, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("../capacity/measured.json", append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for replicas, w := range want {
		got, err := capacity.Measured(replicas)
		if err != nil || !reflect.DeepEqual(got, w) {
			t.Errorf("min-replicas %d: measured %+v, %v; the results say %+v (go test ./internal/capacity -run TestMeasured -update)", replicas, got, err, w)
		}
	}
	if _, err := capacity.Measured(2); !errors.Is(err, capacity.ErrNoRun) {
		t.Errorf("min-replicas 2, never measured: %v; want capacity.ErrNoRun", err)
	}
}
