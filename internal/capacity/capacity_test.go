package capacity

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"seckill/internal/bench"
	"seckill/internal/sale"
)

// run is a clean result line of a bench run with an API node and a worker node apart: requests,
// wins, and the CPU seconds each role used (the crowd's; the drain's are added to redis and the
// worker as extra to prove they count).
func run(name string, requests, wins int64, api, redis, worker, db float64) Run {
	r := Run{Scenario: name, Machine: "2 cores"}
	r.Requests, r.Wins, r.Stock, r.OK = requests, wins, wins, true
	r.Seconds, r.DrainS = 2, 0.5
	r.Setup = &bench.Setup{Redis: "spawn", DB: "spawn:mariadb", Fsync: "always", Roles: []string{"api", "worker"}}
	r.CPU = []bench.RoleCPU{
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
	allwin := []Run{
		run("allwin-a", 10_000, 10_000, 1.5, 1, 0.5, 0.4),
		run("allwin-b", 10_000, 10_000, 2, 0.8, 0.4, 0.5),
		run("allwin-c", 10_000, 10_000, 9, 1.2, 0.6, 0.6),
	}
	// A flash run: 40,000 requests, 500 wins; 500 × 200 µs of the API's 2.1 s went to the wins.
	flash := run("flash", 40_000, 500, 2.1, 0.05, 0.02, 0.02)
	// Runs that must not count, each with CPU figures that would show if they did.
	ignored := func() []Run {
		var out []Run
		for _, spoil := range []func(*Run){
			func(r *Run) { r.OK = false },
			func(r *Run) { r.Fault = &bench.FaultReport{Kind: "api"} },
			func(r *Run) { r.Unanswered = 1 },
			func(r *Run) { r.Restocked = 3 },
			func(r *Run) { r.Line = &bench.LineReport{} },
			func(r *Run) { r.Setup = nil },
			func(r *Run) { r.Setup.InProcess = true },
			func(r *Run) { r.Setup.Roles = []string{"all"} },
			func(r *Run) { r.Setup.Redis = "" },
			func(r *Run) { r.Setup.MinReplicas = 1 },
		} {
			for _, r := range []Run{run("spoilt", 10_000, 10_000, 500, 500, 500, 500), run("spoilt", 40_000, 500, 500, 500, 500, 500)} {
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
	if strings.Join(c.AllWinRuns, " ") != "allwin-a allwin-b allwin-c" || strings.Join(c.FlashRuns, " ") != "flash" || c.Machine != "2 cores" || c.Setup.Redis != "spawn" {
		t.Errorf("costs from %v and %v on %q %+v", c.AllWinRuns, c.FlashRuns, c.Machine, c.Setup)
	}

	// The replicated runs are their own: asked for min-replicas 1, only they count.
	var r1 []Run
	for _, r := range []Run{run("allwin-r1", 10_000, 10_000, 3, 2, 0.5, 0.5), run("flash-r1", 40_000, 500, 3, 0.1, 0.1, 0.1)} {
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
	for name, runs := range map[string][]Run{
		"nothing":              nil,
		"no flash":             {allwin},
		"no all-win":           {flash},
		"no API CPU":           {noAPI, flash},
		"other replicas only":  {withReplicas(allwin, 2), withReplicas(flash, 2)},
		"a fault in every run": {withFault(allwin), withFault(flash)},
	} {
		if _, err := CostsOf(runs, 0); !errors.Is(err, ErrNoRun) {
			t.Errorf("%s: err %v, want ErrNoRun", name, err)
		}
	}
}

func withReplicas(r Run, n int) Run {
	s := *r.Setup
	s.MinReplicas, r.Setup = n, &s
	return r
}

func withFault(r Run) Run {
	r.Fault = &bench.FaultReport{Kind: "redis"}
	return r
}

// costs are round figures: one master takes 5,000 grabs/s at half a core, a worker 5,000 orders/s.
var costs = Costs{Loss: 50e-6, Win: 200e-6, Grab: 100e-6, RedisAll: 300e-6, Place: 50e-6, Write: 50e-6, OrdersPerS: 4000}

func TestSize(t *testing.T) {
	base := Sale{Peak: 100_000, Users: 1_000_000, Stock: 1000, PerUser: 1, Kind: sale.KindItem,
		Drain: time.Minute, Cores: 8, Headroom: 0.5}
	tests := []struct {
		name   string
		change func(*Sale)
		want   Plan // the figures compared; Sale, Costs and Notes are not
		notes  []string
	}{
		{"a flash far above one master", func(*Sale) {}, Plan{
			Wins: 1000, MasterRate: 5000, Shards: 1, WinRate: 5000, SellS: 0.2, Masters: 1, Replicas: 1, RedisCores: 1.5,
			// 5,000 wins × 200 µs + 95,000 others × 50 µs = 5.75 cores, 4 cores a node.
			APICores: 5.75, APINodes: 2, WorkerNodes: 2, WorkerRate: 5000, OrderRate: 5000, WorkerCores: 0.25, DrainS: 0,
			DBCores: 0.5, RateUser: DefaultRateUser, RateNode: 2500,
		}, []string{"under 1s: no shards", "SECKILL_RATE_NODE=2500", "up to 3.8 s past the sell-out"}},
		{"a peak one master takes", func(s *Sale) { s.Peak = 4000 }, Plan{
			Wins: 1000, MasterRate: 5000, Shards: 1, WinRate: 4000, SellS: 0.25, Masters: 1, Replicas: 1, RedisCores: 1.2,
			APICores: 0.8, APINodes: 2, WorkerNodes: 2, WorkerRate: 5000, OrderRate: 4000, WorkerCores: 0.2,
			DBCores: 0.4, RateUser: DefaultRateUser,
		}, []string{"one master takes the peak's grabs at 50 % of a core: no shards"}},
		{"an all-win drop sharded", func(s *Sale) { s.Stock, s.Users, s.Peak = 2_000_000, 2_000_000, 40_000 }, Plan{
			Wins: 2_000_000, MasterRate: 5000, Shards: 8, WinRate: 40_000, SellS: 50, Masters: 8, Replicas: 1, RedisCores: 12,
			// 40,000 × 200 µs = 8 cores: 2 nodes at 4 each. The orders may take 50 s + 1 min:
			// 18,182/s, 4 workers of 5,000/s, done 50 s later than the wins.
			APICores: 8, APINodes: 2, WorkerNodes: 4, WorkerRate: 5000, OrderRate: 20_000, WorkerCores: 1, DrainS: 50,
			DBCores: 2, RateUser: DefaultRateUser,
		}, []string{"split into 8 shards"}},
		{"a long red-packet rain on one master", func(s *Sale) { s.Kind, s.Stock, s.Users, s.Peak = sale.KindRedPacket, 100_000, 1_000_000, 20_000 }, Plan{
			Wins: 100_000, MasterRate: 5000, Shards: 1, WinRate: 5000, SellS: 20, Masters: 1, Replicas: 1, RedisCores: 1.5,
			APICores: 1.75, APINodes: 2, WorkerNodes: 2, WorkerRate: 5000, OrderRate: 5000, WorkerCores: 0.25,
			DBCores: 0.5, RateUser: DefaultRateUser, RateNode: 2500,
		}, []string{"split the rain into several packets", "SECKILL_RATE_NODE=2500"}},
		{"a replica for every grab", func(s *Sale) { s.MinReplicas = 1; s.Peak = 4000 }, Plan{
			Wins: 1000, MasterRate: 5000, Shards: 1, WinRate: 4000, SellS: 0.25, Masters: 3, Replicas: 2, RedisCores: 1.2,
			APICores: 0.8, APINodes: 2, WorkerNodes: 2, WorkerRate: 5000, OrderRate: 4000, WorkerCores: 0.2,
			DBCores: 0.4, RateUser: DefaultRateUser,
		}, nil},
		{"shards asked for", func(s *Sale) { s.Shards = 4 }, Plan{
			Wins: 1000, MasterRate: 5000, Shards: 4, WinRate: 20_000, SellS: 0.05, Masters: 4, Replicas: 1, RedisCores: 6,
			APICores: 8, APINodes: 2, WorkerNodes: 2, WorkerRate: 5000, OrderRate: 10_000, WorkerCores: 0.5, DrainS: 0.05,
			DBCores: 1, RateUser: DefaultRateUser, RateNode: 10_000,
		}, nil},
		{"a ramp makes its peak", func(s *Sale) { s.Peak, s.Ramp, s.Clicks, s.Users = 0, 100*time.Second, 2, 200_000 }, Plan{
			// 200,000 users clicking twice over 100 s: 4,000 a second, under one master.
			Wins: 1000, MasterRate: 5000, Shards: 1, WinRate: 4000, SellS: 0.25, Masters: 1, Replicas: 1, RedisCores: 1.2,
			APICores: 0.8, APINodes: 2, WorkerNodes: 2, WorkerRate: 5000, OrderRate: 4000, WorkerCores: 0.2,
			DBCores: 0.4, RateUser: DefaultRateUser,
		}, []string{"one master takes the peak's grabs"}},
		{"wins come as fast as the workers must", func(s *Sale) { s.Drain = 0; s.Stock, s.Users, s.Peak = 2_000_000, 2_000_000, 40_000 }, Plan{
			Wins: 2_000_000, MasterRate: 5000, Shards: 8, WinRate: 40_000, SellS: 50, Masters: 8, Replicas: 1, RedisCores: 12,
			APICores: 8, APINodes: 2, WorkerNodes: 8, WorkerRate: 5000, OrderRate: 40_000, WorkerCores: 2,
			DBCores: 4, RateUser: DefaultRateUser,
		}, []string{"a worker placing 5,000 orders/s goes beyond the 4,000/s", "40,000/s into one database"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := base
			tc.change(&s)
			p, err := Size(s, costs)
			if err != nil {
				t.Fatal(err)
			}
			got := p
			got.Sale, got.Costs, got.Notes = Sale{}, Costs{}, nil
			if !plansNear(got, tc.want) {
				t.Errorf("plan\n got %+v\nwant %+v", got, tc.want)
			}
			notes := strings.Join(p.Notes, "\n")
			for _, n := range tc.notes {
				if !strings.Contains(notes, n) {
					t.Errorf("notes %q: want %q", notes, n)
				}
			}
			var text, js bytes.Buffer
			if err := p.WriteText(&text); err != nil || !strings.Contains(text.String(), "API nodes") {
				t.Errorf("text: %v\n%s", err, text.String())
			}
			var back Plan
			if err := p.WriteJSON(&js); err != nil || json.Unmarshal(js.Bytes(), &back) != nil || back.APINodes != p.APINodes || back.Costs.Grab != costs.Grab {
				t.Errorf("json: %v\n%s", err, js.String())
			}
		})
	}
}

// plansNear compares the figures of two plans, the floating ones to a rounding.
func plansNear(a, b Plan) bool {
	fa, fb := []float64{a.MasterRate, a.WinRate, a.SellS, a.RedisCores, a.APICores, a.WorkerCores, a.WorkerRate, a.OrderRate, a.DrainS, a.DBCores},
		[]float64{b.MasterRate, b.WinRate, b.SellS, b.RedisCores, b.APICores, b.WorkerCores, b.WorkerRate, b.OrderRate, b.DrainS, b.DBCores}
	for i := range fa {
		if math.Abs(fa[i]-fb[i]) > 1e-6*math.Max(1, math.Abs(fb[i])) {
			return false
		}
	}
	a.MasterRate, a.WinRate, a.SellS, a.RedisCores, a.APICores, a.WorkerCores, a.WorkerRate, a.OrderRate, a.DrainS, a.DBCores = fb[0], fb[1], fb[2], fb[3], fb[4], fb[5], fb[6], fb[7], fb[8], fb[9]
	return a.Wins == b.Wins && a.Shards == b.Shards && a.Masters == b.Masters && a.Replicas == b.Replicas &&
		a.APINodes == b.APINodes && a.WorkerNodes == b.WorkerNodes && a.RateUser == b.RateUser && a.RateNode == b.RateNode
}

func TestSizeRefuses(t *testing.T) {
	good := Sale{Peak: 1000, Users: 1000, Stock: 10, PerUser: 1, Kind: sale.KindItem, Cores: 8, Headroom: 0.5}
	for name, tc := range map[string]struct {
		change func(*Sale)
		want   string
	}{
		"no peak":             {func(s *Sale) { s.Peak = 0 }, "--peak 0"},
		"a peak of NaN":       {func(s *Sale) { s.Peak = math.NaN() }, "--peak NaN"},
		"no users":            {func(s *Sale) { s.Users = 0 }, "--users 0"},
		"no stock":            {func(s *Sale) { s.Stock = 0 }, "--stock 0"},
		"no per-user":         {func(s *Sale) { s.PerUser = 0 }, "--per-user-limit 0"},
		"a coupon":            {func(s *Sale) { s.Kind = "coupon" }, `--kind "coupon"`},
		"a negative drain":    {func(s *Sale) { s.Drain = -time.Second }, "--drain -1s"},
		"no cores":            {func(s *Sale) { s.Cores = 0 }, "--cores 0"},
		"headroom above 1":    {func(s *Sale) { s.Headroom = 1.5 }, "--headroom 1.5"},
		"three replicas":      {func(s *Sale) { s.MinReplicas = 3 }, "--min-replicas 3"},
		"shards of 65":        {func(s *Sale) { s.Shards = 65 }, "--shards 65"},
		"a sharded packet":    {func(s *Sale) { s.Kind, s.Shards = sale.KindRedPacket, 2 }, "only an item's stock shards"},
		"a peak and a ramp":   {func(s *Sale) { s.Ramp, s.Clicks = time.Minute, 1 }, "not both"},
		"a ramp of no clicks": {func(s *Sale) { s.Peak, s.Ramp, s.Clicks = 0, time.Minute, 0 }, "--clicks 0"},
		"a ramp too steep":    {func(s *Sale) { s.Peak, s.Ramp, s.Clicks, s.Users = 0, time.Millisecond, 100, 1e9 }, "want 1 to"},
		"a negative ramp":     {func(s *Sale) { s.Peak, s.Ramp, s.Clicks = 0, -time.Minute, 1 }, "--arrival ramp:-1m0s"},
	} {
		s := good
		tc.change(&s)
		if _, err := Size(s, costs); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", name, err, tc.want)
		}
	}
	for _, c := range []Costs{{Win: 1e-4}, {Loss: 1e-5, Win: 1e-4, Grab: 2, Place: 1e-5}, {Loss: -1e-5, Win: 1e-4, Grab: 1e-4, Place: 1e-5}} {
		if _, err := Size(good, c); !errors.Is(err, ErrNoRun) {
			t.Errorf("costs %+v: err %v, want ErrNoRun", c, err)
		}
	}
}

// TestTheProjectsResults sizes the design documents' sale from the results the repository holds.
func TestTheProjectsResults(t *testing.T) {
	f, err := os.Open("../../docs/bench/results.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	runs, err := ReadRuns(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, replicas := range []int{0, 1} {
		c, err := CostsOf(runs, replicas)
		if err != nil {
			t.Fatalf("min-replicas %d: %v", replicas, err)
		}
		p, err := Size(Sale{Peak: 1_000_000, Users: 1_000_000, Stock: 1000, PerUser: 1, Kind: sale.KindItem,
			Drain: time.Minute, Cores: 8, Headroom: 0.6, MinReplicas: replicas}, c)
		if err != nil {
			t.Fatal(err)
		}
		if p.APINodes < minAPINodes || p.Masters < 1 || p.RateNode < 1 || p.SellS <= 0 {
			t.Errorf("min-replicas %d: %+v", replicas, p)
		}
	}
}

func TestReadRuns(t *testing.T) {
	runs, err := ReadRuns(strings.NewReader(`{"scenario":"a","requests":3}` + "\n\n" + `{"scenario":"b","cpu":[{"role":"api","crowd_cpu_s":1.5}]}` + "\n"))
	if err != nil || len(runs) != 2 || runs[0].Requests != 3 || runs[1].CPU[0].CrowdS != 1.5 {
		t.Fatalf("runs %+v, err %v", runs, err)
	}
	if _, err := ReadRuns(strings.NewReader("{\"scenario\":\"a\"}\nnot json\n")); err == nil || !strings.Contains(err.Error(), "result line 2") {
		t.Fatalf("a bad line: err %v", err)
	}
}

func FuzzReadRuns(f *testing.F) {
	f.Add([]byte(`{"scenario":"a","requests":40000,"wins":500,"ok":true,"setup":{"redis":"spawn","roles":["api","worker"]},"cpu":[{"role":"api","crowd_cpu_s":2}]}`))
	f.Add([]byte("{}\n{\"wins\":-1}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		runs, err := ReadRuns(bytes.NewReader(b))
		if err != nil {
			return
		}
		c, err := CostsOf(runs, 0)
		if err != nil {
			return
		}
		// Whatever the file says, a plan either is refused or holds its floors.
		p, err := Size(Sale{Peak: 1000, Users: 1000, Stock: 10, PerUser: 1, Kind: sale.KindItem, Cores: 8, Headroom: 0.5}, c)
		if err == nil && (p.APINodes < minAPINodes || p.WorkerNodes < minWorkerNodes || p.Shards < 1) {
			t.Fatalf("plan %+v from costs %+v", p, c)
		}
	})
}
