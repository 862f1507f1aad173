package faults_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"seckill/internal/bench"
	"seckill/internal/e2etest"
	"seckill/internal/testtier"
)

// TestNemesis is the short nemesis schedule of make test: for 30 s a crowd of 100 clicks a second
// buys from four activities (an item with a unit for every click, a scarce one the operator adds
// stock to, a red packet, a waiting line) on two API nodes and a worker of the built binary, on a Redis behind
// a bad-network proxy and PostgreSQL, all started by bench, while seed 35's strikes stop an API
// node and the worker, kill Redis, stop the database, slow, reset and cut the network to Redis
// and skew the nodes' clocks (eight strikes of seven kinds). The buyers who pay do so
// at the simulated provider (--payments), whose notices come on time, late, twice or after a
// forged one, and are sent again until a node takes them; the shop's webhook receiver hears the
// order events. The checker reads the streamed history back: every activity keeps its invariants
// (every payment kept or owed back, every order's events once each and in order among them), its
// stock is what the operator's changes made it and linearizable, and the line admitted its
// tickets first come, first served. Its availability (a 202 within a second of each heal) is held in
// the documented runs (BENCHMARKS §19), on a machine the run has to itself: here, beside the
// other packages' tests, a heal's second is the machine's, and a late one is logged.
func TestNemesis(t *testing.T) {
	testtier.NeedsServer(t, "a nemesis run of the built binary")
	bin := e2etest.Binary(t)
	path := filepath.Join(t.TempDir(), "history.jsonl")
	args := []string{"bench", "--nemesis", "35", "--duration", "30s", "--rate", "100", "--concurrency", "32", "--spawn", "2",
		"--workers", "1", "--redis", "spawn", "--db", "spawn:postgres", "--binary", bin, "--json", "--history", path, "--payments"}
	var out bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	runErr := cmd.Run() // non-zero too when the checker found a violation: the result says which
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var res bench.NemesisResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("seckill %s: %v; its last line is not the JSON result: %v\n%s", strings.Join(args, " "), runErr, err, out.String())
	}
	if len(res.Activities) != 4 || res.History != path || res.StockOff != 0 || res.Replay == "" {
		t.Fatalf("result %+v", res)
	}
	for _, a := range res.Activities {
		if !a.OK() {
			t.Fatalf("%s broke an invariant: %+v, line %+v", a.Name, a.Verdict, a.Line)
		}
		switch l := a.Verdict.Linear; {
		case a.Line != nil:
			if a.Line.Tickets == 0 || a.Line.Winners == 0 {
				t.Fatalf("%s: the line answered nothing: %+v", a.Name, a.Line)
			}
		case l == nil || l.Ops == 0:
			t.Fatalf("%s: the stock was not checked for linearizability: %+v", a.Name, l)
		case l.Result == bench.LinearUnknown:
			t.Fatalf("%s: the stock's linearizability undecided after %.1f s (%d operations)", a.Name, l.Seconds, l.Ops)
		}
	}
	if a := res.Availability; !a.OK() {
		t.Logf("availability, beside the other tests: %+v", a)
	} else if runErr != nil || !res.OK {
		t.Fatalf("every check passed and the run says %v, ok %v", runErr, res.OK)
	}
	kinds := map[string]bool{}
	for _, s := range res.Strikes {
		kinds[s.Kind] = true
	}
	if len(res.Strikes) < 5 || len(kinds) < 4 || !kinds[bench.SkewAPI] || !kinds[bench.KillRedis] || !kinds[bench.DBOutage] {
		t.Fatalf("%d strikes of %d kinds: %+v", len(res.Strikes), len(kinds), res.Strikes)
	}
	for _, a := range res.Activities {
		if a.Verdict.Wins == 0 || a.Verdict.Requests == 0 {
			t.Fatalf("%s: nothing sold: %+v", a.Name, a.Verdict)
		}
	}
	if p := res.Payments; p == nil || p.Payments == 0 || p.Late == 0 || p.Duplicated == 0 || p.Forged == 0 || p.Events == 0 ||
		p.Kept == 0 || p.Unsigned != 0 {
		t.Fatalf("the payments: %+v; want some of each kind, kept, and every order event signed", p)
	}
	if res.Availability.Heals == 0 {
		t.Fatalf("no heal was held to the promise: %+v", res.Availability)
	}
	history := e2etest.ReadHistory(t, path)
	ops := map[string]int{}
	for _, r := range history {
		ops[r.Op]++
	}
	// The machine sampled every 0.25 s until the last heal: 30 s and more, at least one a second
	// however busy.
	if int64(len(history)-ops[bench.OpMachine]) != res.Requests || ops[bench.OpStrike] != len(res.Strikes) || ops[bench.OpHeal] != len(res.Strikes) ||
		ops[""] < 3000 || ops[bench.OpPay] == 0 || ops[bench.OpCancel] == 0 || ops[bench.OpChange] != 4 || ops[bench.OpMachine] < 30 {
		t.Fatalf("the history's %d lines by op: %v; the result: %d requests, %d strikes", len(history), ops, res.Requests, len(res.Strikes))
	}
}
