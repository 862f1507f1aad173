package bench

import (
	"reflect"
	"slices"
	"testing"
	"time"
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
