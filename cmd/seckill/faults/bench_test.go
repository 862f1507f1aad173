package faults_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"seckill/internal/bench"
	"seckill/internal/dbtest"
	"seckill/internal/e2etest"
	"seckill/internal/redistest"
)

// TestBenchOperator: an operator adds stock, renames the sale and adds stock again through two
// nodes of the built binary (on one Redis and MariaDB) while an all-win crowd of 8,000 grabs,
// then ends the sale. The crowd's answers stay what they are without the changes (at most 0.2 %
// BUSY; the nodes' breakers once took the gate's "your copy is stale" for Redis failing and
// answered 79 % BUSY), every acknowledged grab is an order, the stock counts the units added and
// no grab sent after the end wins on either node. The same on one embedded node.
func TestBenchOperator(t *testing.T) {
	bin := e2etest.Binary(t)
	for name, args := range map[string]func(t *testing.T) []string{
		"redis": func(t *testing.T) []string {
			return []string{"--spawn", "2", "--redis", redistest.Start(t, redistest.Options{}).URL(), "--db", dbtest.MySQLDSN(t)}
		},
		"embedded": func(t *testing.T) []string { return []string{"--spawn", "1"} },
	} {
		t.Run(name, func(t *testing.T) {
			res, history := e2etest.BenchBinary(t, append(args(t), "--binary", bin, "--operator", "--users", "8000", "--dup", "0",
				"--stock", "10000", "--concurrency", "32")...)
			o := res.Operator
			if o == nil || len(o.Changes) != 4 || o.Added != 10 || o.Ended == 0 {
				t.Fatalf("operator report %+v", o)
			}
			if !res.OK || res.Stock != 10010 || res.Lost+res.Duplicates+res.Oversell+res.AfterEnd+res.ChangesFailed != 0 {
				t.Fatalf("after the operator's changes: %+v", res)
			}
			if o.BusyShare > 0.002 {
				t.Fatalf("%d of %d answers BUSY through the operator's changes (%v), want at most 0.2 %%",
					o.Busy, res.Requests, e2etest.ErrorsOf(history))
			}
			ended, wonAfter := 0, 0
			for _, r := range history {
				switch {
				case r.Outcome == bench.Ended:
					ended++
				case r.Outcome == bench.Won && r.Start > o.Ended:
					wonAfter++
				}
			}
			if ended == 0 || res.Wins == 0 || wonAfter != 0 {
				t.Fatalf("%d grabs refused ENDED, %d won, %d won after the end: the end must come mid-crowd and hold", ended, res.Wins, wonAfter)
			}
		})
	}
}

// TestBenchFaults runs the fault scenarios: an API node or the worker node (processes of the
// built binary) or redis-server SIGKILLed, or the database down for 3 s, a quarter of the way
// through a crowd of 8,000 on a stock of 4,000, then restarted. The checker must find every unit
// sold exactly once and every acknowledged grab placed.
func TestBenchFaults(t *testing.T) {
	bin := e2etest.Binary(t)
	tests := []struct {
		name  string
		args  func(t *testing.T) []string
		nodes int
		cpu   []string // the roles whose CPU the report must give
		setup bench.Setup
	}{
		{"embedded api", func(t *testing.T) []string { return []string{"--spawn", "1", "--kill", "api"} }, 1,
			[]string{"bench", "all"}, bench.Setup{DB: "sqlite", Roles: []string{"all"}}},
		{"redis api", func(t *testing.T) []string {
			// bench starts the Redis (its CPU is counted among bench's own processes', which a
			// server the test started is not)
			return []string{"--spawn", "2", "--kill", "api", "--redis", "spawn", "--db", dbtest.MySQLDSN(t)}
		}, 2, []string{"bench", "all", "redis"}, bench.Setup{Redis: "spawn", DB: "given", Fsync: "always", Roles: []string{"all", "all"}}},
		{"redis worker", func(t *testing.T) []string {
			return []string{"--spawn", "1", "--kill", "worker", "--redis", "spawn", "--db", dbtest.MySQLDSN(t)}
		}, 1, []string{"bench", "api", "worker", "redis"}, bench.Setup{Redis: "spawn", DB: "given", Fsync: "always", Roles: []string{"api", "worker"}}},
		{"spawned redis", func(t *testing.T) []string {
			return []string{"--redis", "spawn", "--kill", "redis", "--db", dbtest.MySQLDSN(t)}
		}, 1, []string{"bench+server", "redis"}, bench.Setup{Redis: "spawn", DB: "given", Fsync: "always", InProcess: true}},
		{"spawned db", func(t *testing.T) []string {
			return []string{"--redis", "spawn", "--db", "spawn:mariadb", "--db-outage", "3s"}
		}, 1, []string{"bench+server", "redis", "database"}, bench.Setup{Redis: "spawn", DB: "spawn:mariadb", Fsync: "always", InProcess: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plot := filepath.Join(t.TempDir(), "run.svg")
			args := append(tc.args(t), "--binary", bin, "--at", "25%", "--users", "8000", "--dup", "0", "--stock", "4000",
				"--concurrency", "32", "--plot", plot)
			res, history := e2etest.BenchBinary(t, args...)
			if svg, err := os.ReadFile(plot); err != nil || !bytes.HasPrefix(svg, []byte("<svg")) || !bytes.Contains(svg, []byte("back after")) {
				t.Fatalf("plot with the fault marked: %v\n%.200s", err, svg)
			}
			// A grab in flight when a process died may have taken its unit without an answer:
			// its order is in the database and it counts as unanswered, not as a win. Clicks
			// refused while a dependency was down asked for nothing; the demand the server
			// decided on must still exceed the stock, so that the checker proves it all sold.
			if !res.OK || res.Wins > 4000 || res.Demand < 4000 || res.Oversell+res.Undersell+res.Duplicates+res.Lost != 0 {
				t.Fatalf("after the fault: %+v", res)
			}
			if res.Fault == nil || res.Fault.Kind != strings.Fields(tc.name)[1] || res.Fault.RecoveryS <= 0 || res.Nodes != tc.nodes {
				t.Fatalf("fault report %+v of %d nodes", res.Fault, res.Nodes)
			}
			if diff := cmp.Diff(&tc.setup, res.Setup); diff != "" {
				t.Errorf("setup (-want +got):\n%s", diff)
			}
			e2etest.CheckCPU(t, res, tc.cpu...)
			before := 0 // answers before the kill: it must have struck mid-sale
			killedAt := history[0].Intended + int64(res.Fault.AtS*1e6)
			for _, r := range history {
				if r.Outcome == bench.Won && r.End < killedAt {
					before++
				}
			}
			if before == 0 || before >= 4000 {
				t.Fatalf("%d units sold before the kill: it did not strike mid-sale", before)
			}
			t.Logf("killed %.2f s in with %d units sold, back after %.2f s; %d unanswered",
				res.Fault.AtS, before, res.Fault.RecoveryS, res.Unanswered)
		})
	}
}

// TestBenchRedisFaults runs the faults of a Redis deployment bench starts itself, on the
// in-process server: the master of the sale's slot killed on a cluster with replicas, the master
// killed under Sentinel (both with a replica required for every acknowledgement, so that none can
// be lost), the sale's slot moved, and a link to Redis that resets every connection for 2 s. The
// checker must find every unit sold once and every acknowledged grab placed, and the report must
// say how long the sale stood still and how many answers were BUSY.
func TestBenchRedisFaults(t *testing.T) {
	// Over a ramp: a burst would be answered before the fault is over. The crowd's clicks
	// answered BUSY are not tried again, so the clicks after the fault must still outnumber
	// the stock left, however long the fault lasts. With the defaults, 2,000 units are sold by
	// the fault (25 % of 8,000 clicks at 800 a second), and the 1,000 left need 1.25 s of the
	// crowd once the gate is back: a fault may last up to 6 s. A Sentinel failover may take
	// longer: down-after (2 s), and when the first election fails on a loaded machine, the
	// failover timeout twice (5 s each) before the next; it took 2.4 s idle, and 5 s and 7 s in
	// CI with the whole suite beside it. Its sale is slower and smaller: 960 units sold by the
	// fault (12 % of 8,000 clicks at 500 a second), 540 left for 1.1 s of the crowd, so the
	// failover may take up to 13 s.
	type crowd struct{ ramp, stock, at string }
	usual := crowd{"ramp:10s", "3000", "25%"}
	for _, tc := range []struct {
		fault string
		args  []string
		crowd crowd
	}{
		{"redis-failover", []string{"--redis", "spawn:cluster", "--min-replicas", "1"}, usual},
		{"sentinel-failover", []string{"--redis", "spawn:sentinel", "--min-replicas", "1"}, crowd{"ramp:16s", "1500", "12%"}},
		{"reshard", []string{"--redis", "spawn:cluster"}, usual},
		{"netem", []string{"--redis", "spawn", "--netem", "reset", "--fault-for", "2s"}, usual},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			args := append(tc.args, "--fault", tc.fault, "--db", dbtest.MySQLDSN(t), "--at", tc.crowd.at, "--users", "8000", "--dup", "0",
				"--stock", tc.crowd.stock, "--concurrency", "32", "--arrival", tc.crowd.ramp)
			stock, _ := strconv.ParseInt(tc.crowd.stock, 10, 64)
			res, history := e2etest.BenchBinary(t, args...)
			if !res.OK || res.Wins > stock || res.Demand < stock || res.Oversell+res.Undersell+res.Duplicates+res.Lost != 0 {
				t.Fatalf("after the fault: %+v; the errors: %v", res, e2etest.ErrorsOf(history))
			}
			f := res.Fault
			if f == nil || f.Kind != tc.fault || f.RecoveryS <= 0 || f.OutageS == nil || *f.OutageS < 0 ||
				f.BusyShare < 0 || f.BusyShare > 1 || (f.Busy > 0) != (f.BusyShare > 0) {
				t.Fatalf("fault report %+v", f)
			}
			t.Logf("%s %.2f s in: back after %.2f s, %.3f s at most without a win, %d BUSY (%.2f %%)",
				f.Kind, f.AtS, f.RecoveryS, *f.OutageS, f.Busy, 100*f.BusyShare)
		})
	}
}
