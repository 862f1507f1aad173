package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/httpapi/wire"
)

// TestSchedule: a seed replays its schedule and another seed draws another; every schedule keeps
// to the bounds of the promise (at most two strikes at once, one on Redis and one on the database
// at a time, a node struck once at a time, an API node always up), each strike healed before the
// run ends; and over many seeds every fault the topology has is drawn.
func TestSchedule(t *testing.T) {
	cluster := Topology{APINodes: 3, Workers: 1, Redis: "spawn:cluster", DB: "spawn:mariadb", Netem: true}
	sentinel := Topology{APINodes: 3, Workers: 1, Redis: "spawn:sentinel", DB: "spawn:postgres"}
	const d = 2 * time.Minute
	a, err := Schedule(7, d, cluster)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Schedule(7, d, cluster)
	c, _ := Schedule(8, d, cluster)
	if !reflect.DeepEqual(a, b) || reflect.DeepEqual(a, c) || len(a) < 15 {
		t.Fatalf("seed 7 twice: %d and %d strikes, equal %v; seed 8 equal too: %v", len(a), len(b), reflect.DeepEqual(a, b), reflect.DeepEqual(a, c))
	}
	for _, top := range []Topology{cluster, sentinel} {
		seen := map[string]bool{}
		for seed := range uint64(200) {
			s, err := Schedule(seed, d, top)
			if err != nil {
				t.Fatal(err)
			}
			checkBounds(t, seed, s, d, top)
			for _, x := range s {
				seen[x.Kind] = true
				if x.Skew > 0 {
					seen[x.Kind+" ahead"] = true
				} else if x.Skew < 0 {
					seen[x.Kind+" behind"] = true
				}
			}
		}
		for _, k := range top.Kinds() {
			if !seen[k] {
				t.Errorf("%+v: 200 schedules never drew %s", top, k)
			}
		}
		if !seen[SkewAPI+" ahead"] || !seen[SkewAPI+" behind"] {
			t.Errorf("%+v: 200 schedules never skewed an API node's clock both ways", top)
		}
	}
	if kinds := sentinel.Kinds(); slices.Contains(kinds, ClusterFailover) || !slices.Contains(kinds, SentinelFailover) || slices.Contains(kinds, NetReset) {
		t.Errorf("a Sentinel deployment without a proxy strikes %v", kinds)
	}
	sentinel.Netem = true
	if kinds := sentinel.Kinds(); !slices.Contains(kinds, NetLatency) || !slices.Contains(kinds, NetReset) || !slices.Contains(kinds, NetPartition) {
		t.Errorf("a Sentinel deployment with proxies before its servers strikes %v: no bad network", kinds)
	}
	if _, err := Schedule(1, d, Topology{APINodes: 1, DB: "sqlite"}); err == nil {
		t.Error("a deployment with nothing to strike (its one API node must stay up): no error")
	}
	if _, err := Schedule(1, time.Second, cluster); err == nil {
		t.Error("a run of a second: no error")
	}
}

// checkBounds holds schedule s of seed to the bounds TestSchedule names.
func checkBounds(t *testing.T, seed uint64, s []Strike, d time.Duration, top Topology) {
	t.Helper()
	for i, x := range s {
		if x.At <= 0 || x.Hold < time.Millisecond || x.At+x.Hold > d || i > 0 && x.At <= s[i-1].At {
			t.Fatalf("seed %d: strike %d %+v out of the run of %s, or out of order", seed, i, x, d)
		}
		skews := x.Kind == SkewAPI || x.Kind == SkewWorker
		if skews && (x.Skew.Abs() < minClockSkew || x.Skew.Abs() > MaxClockSkew) || !skews && x.Skew != 0 {
			t.Fatalf("seed %d: strike %+v: a clock skewed by %v; want one within %v..%v either way, and only on a skew", seed, x,
				x.Skew, minClockSkew, MaxClockSkew)
		}
		var live []Strike
		for _, y := range s[:i] {
			if y.At+y.Hold > x.At {
				live = append(live, y)
			}
		}
		if len(live) >= MaxAtOnce {
			t.Fatalf("seed %d: strike %+v beside %d others", seed, x, len(live))
		}
		api := 0
		for _, y := range append(live, x) {
			if group(y.Kind) == "api" {
				api++
			}
		}
		if api >= top.APINodes && api > 0 {
			t.Fatalf("seed %d: %d of %d API nodes struck at once", seed, api, top.APINodes)
		}
		for _, y := range live {
			if group(y.Kind) == group(x.Kind) && (group(x.Kind) == "redis" || group(x.Kind) == "db" || y.Target == x.Target) {
				t.Fatalf("seed %d: %+v struck while %+v holds", seed, x, y)
			}
		}
	}
}

// TestAStrikeWaitsForItsPartToHeal: the schedule lets a node be struck again once the hold of
// its last strike is over, but its heal (a restart) may take longer; the next strike on it waits
// for the heal, while a strike on another part goes at its time.
func TestAStrikeWaitsForItsPartToHeal(t *testing.T) {
	var buf bytes.Buffer
	h := NewHistoryWriter(&buf)
	n := Nemesis{Strike: func(_ context.Context, s Strike, _ string) (func(context.Context) error, error) {
		return func(context.Context) error {
			if s.Kind == KillWorker {
				time.Sleep(400 * time.Millisecond) // a slow restart
			}
			return nil
		}, nil
	}}
	kill := Strike{At: 0, Hold: 100 * time.Millisecond, Kind: KillWorker}
	skew := Strike{At: 200 * time.Millisecond, Hold: 50 * time.Millisecond, Kind: SkewWorker, Skew: time.Second}
	other := Strike{At: 200 * time.Millisecond, Hold: 50 * time.Millisecond, Kind: StopAPI}
	parts := map[string]*sync.Mutex{partOf(kill): {}, partOf(other): {}}
	if partOf(kill) != partOf(skew) || partOf(kill) == partOf(other) {
		t.Fatalf("parts: %q, %q, %q", partOf(kill), partOf(skew), partOf(other))
	}
	began := time.Now()
	var wg sync.WaitGroup
	for _, s := range []Strike{kill, skew, other} {
		wg.Go(func() {
			if _, err := n.strike(context.Background(), h, began, s, "a", parts[partOf(s)]); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if err := h.Flush(); err != nil {
		t.Fatal(err)
	}
	recs, err := ReadHistory(&buf)
	if err != nil {
		t.Fatal(err)
	}
	at := map[string]int64{}
	for _, r := range recs {
		at[r.Op+" "+strings.Fields(r.Detail)[0]] = r.Start
		if r.Op == OpHeal {
			at[r.Op+" "+strings.Fields(r.Detail)[0]] = r.End
		}
	}
	if at["strike "+SkewWorker] < at["heal "+KillWorker] {
		t.Errorf("the worker's clock was skewed %d µs before its restart ended", at["heal "+KillWorker]-at["strike "+SkewWorker])
	}
	if at["strike "+StopAPI] > at["heal "+KillWorker] {
		t.Errorf("an API node's strike waited for the worker's heal")
	}
}

// TestJudgeFailsAnUndecidedCheck: a run passes only when every check passed, and a stock's
// linearizability that the search could not decide within its budget is not passed: the run is
// not ok and names the activity.
func TestJudgeFailsAnUndecidedCheck(t *testing.T) {
	run := func(linear ...string) NemesisResult {
		var r NemesisResult
		for i, l := range linear {
			a := ActivityResult{Name: strings.Repeat("a", i+1)}
			if l != "" {
				a.Verdict.holdLinear(Linearity{Result: l, Ops: 10})
			}
			r.Activities = append(r.Activities, a)
		}
		r.judge()
		return r
	}
	if r := run(LinearOK, "", LinearOK); !r.OK || len(r.Problems) != 0 {
		t.Fatalf("every check passed: %+v", r)
	}
	if r := run(LinearOK, LinearIllegal); r.OK {
		t.Fatalf("a stock not linearizable: %+v", r)
	}
	r := run(LinearOK, LinearUnknown)
	if r.OK || len(r.Problems) != 1 || !strings.HasPrefix(r.Problems[0], "aa: linearizability undecided") {
		t.Fatalf("a check undecided: %+v", r)
	}
	r = run(LinearOK)
	r.Availability.Late = 1
	if r.judge(); r.OK {
		t.Fatalf("a heal answered late: %+v", r)
	}
}

// TestCrowdIsNotHeldByANodeThatHoldsItsClicks (Sentinel seed 176): one node takes the clicks sent
// to it and answers none, as a stopped node does (SIGSTOP: the kernel accepts, nobody answers);
// the crowd goes on sending every other node's clicks at their times, so that whoever clicks
// after the node is back is answered by it. A crowd of a few workers each waiting for its click's
// answer ended up with every worker held by the stopped node: in seed 176 nothing at all was sent
// for 3 s, and the heal after the stop was judged by clicks the stop had struck.
func TestCrowdIsNotHeldByANodeThatHoldsItsClicks(t *testing.T) {
	release := make(chan struct{})
	var held, answered atomic.Int64
	node := func(holds bool) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			code, status := wire.CodeSoldOut, http.StatusGone
			if holds {
				select {
				case <-release:
				default:
					held.Add(1)
					<-release
					// Back, its deadlines long past: busy, as in seed 176.
					w.Header().Set("Retry-After", "1")
					code, status = wire.CodeBusy, http.StatusServiceUnavailable
				}
			} else {
				answered.Add(1)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(wire.ErrorBody{Error: wire.Error{Code: code, Message: code}})
		}))
	}
	nodes := []*httptest.Server{node(false), node(true), node(false)}
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer func() {
		free()
		for _, s := range nodes {
			s.Close()
		}
	}()
	c, err := NewClient([]string{nodes[0].URL, nodes[1].URL, nodes[2].URL}, "admin", 4)
	if err != nil {
		t.Fatal(err)
	}
	// 60 clicks over a second, each to node i%3; a crowd of 4 workers would have all 4 held by
	// node 1 after its first four clicks.
	const clicks = 60
	n := Nemesis{Seed: 176, Duration: time.Second, Concurrency: 4}
	var buf bytes.Buffer
	h := NewHistoryWriter(&buf)
	sales := []*nemesisSale{{name: "scarce", weight: 1, id: "a"}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.crowd(ctx, c, h, time.Now(), clicks, Crowd{Users: 1000, UserPrefix: "u"}, sales, func(string) string { return "t" })
	}()
	for wait := time.Now().Add(30 * time.Second); answered.Load() < 2*clicks/3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(wait) {
			t.Fatalf("30 s after the crowd began, nodes 0 and 2 had answered %d of their %d clicks, node 1 holding %d: the crowd is held by the node",
				answered.Load(), 2*clicks/3, held.Load())
		}
	}
	for wait := time.Now().Add(30 * time.Second); held.Load() < clicks/3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(wait) {
			t.Fatalf("node 1 got %d of its %d clicks", held.Load(), clicks/3)
		}
	}
	free()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("the crowd did not end once node 1 answered")
	}
	if err := h.Flush(); err != nil {
		t.Fatal(err)
	}
	history, err := ReadHistory(&buf)
	if err != nil {
		t.Fatal(err)
	}
	// Each of node 1's clicks answered busy once, then sold out when sent again.
	busy, sold := map[string]int{}, map[string]int{}
	for _, r := range history {
		switch r.Code {
		case wire.CodeBusy:
			busy[r.Key]++
		case wire.CodeSoldOut:
			sold[r.Key]++
		}
	}
	if len(busy) != clicks/3 || len(sold) != clicks {
		t.Fatalf("%d clicks answered busy, %d sold out at last, of %d records; want %d and %d", len(busy), len(sold), len(history), clicks/3, clicks)
	}
}
