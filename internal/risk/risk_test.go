package risk

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

// t0 is saletest.T0, which this package cannot import (saletest imports redisstore, which
// imports risk).
var t0 = time.Date(2001, 11, 30, 12, 0, 0, 0, time.UTC)

func TestAccountsPerIP(t *testing.T) {
	r := &AccountsPerIP{ChallengeAbove: 20, BlockAt: 100, Window: time.Minute}
	farm, home := netip.MustParseAddr("203.0.113.9"), netip.MustParseAddr("198.51.100.1")
	grab := func(ip netip.Addr, user string, at time.Time) Decision {
		return r.Grab(Signal{IP: ip, User: user, At: at})
	}
	for i := range 20 {
		if d := grab(farm, fmt.Sprint("acct-", i), t0); d != Allow {
			t.Fatalf("account %d of one address: %v, want allow", i+1, d)
		}
	}
	if d := grab(farm, "acct-0", t0); d != Allow {
		t.Fatalf("a known account again: %v, want allow", d)
	}
	for i := 20; i < 99; i++ {
		if d := grab(farm, fmt.Sprint("acct-", i), t0); d != Challenge {
			t.Fatalf("account %d of one address: %v, want challenge", i+1, d)
		}
	}
	for i := 99; i < 150; i++ {
		if d := grab(farm, fmt.Sprint("acct-", i), t0); d != Block {
			t.Fatalf("account %d of one address: %v, want block", i+1, d)
		}
	}
	if d := grab(home, "alice", t0); d != Allow {
		t.Fatalf("another address: %v, want allow", d)
	}
	if d := grab(farm, "late", t0.Add(61*time.Second)); d != Allow {
		t.Fatalf("after the window: %v, want allow (the accounts aged out)", d)
	}
	if d := grab(netip.Addr{}, "x", t0); d != Allow {
		t.Fatalf("no address: %v, want allow", d)
	}
}

func TestCadence(t *testing.T) {
	r := &Cadence{Clicks: 8, Slowest: 5 * time.Second, Jitter: 0.05}
	at := t0
	for i := range 8 {
		want := Allow
		if i == 7 {
			want = Challenge
		}
		if d := r.Grab(Signal{User: "bot", At: at}); d != want {
			t.Fatalf("click %d on a 200 ms beat: %v, want %v", i+1, d, want)
		}
		at = at.Add(200 * time.Millisecond)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	at = t0
	for i := range 50 {
		if d := r.Grab(Signal{User: "person", At: at}); d != Allow {
			t.Fatalf("irregular click %d: %v, want allow", i+1, d)
		}
		at = at.Add(time.Duration(300+rng.IntN(2500)) * time.Millisecond)
	}
	at = t0
	for i := range 20 {
		if d := r.Grab(Signal{User: "patient", At: at}); d != Allow {
			t.Fatalf("regular but slow click %d: %v, want allow", i+1, d)
		}
		at = at.Add(6 * time.Second)
	}
}

func TestSolveTime(t *testing.T) {
	r := SolveTime{Fastest: time.Second}
	if d := r.Answer(Signal{Solve: 300 * time.Millisecond}); d != Block {
		t.Fatalf("solved in 300 ms: %v, want block", d)
	}
	if d := r.Answer(Signal{Solve: 3 * time.Second}); d != Allow {
		t.Fatalf("solved in 3 s: %v, want allow", d)
	}
}

func TestEngineTakesTheWorstAndCountsIt(t *testing.T) {
	var seen []Verdict
	e := New(&AccountsPerIP{ChallengeAbove: 1, BlockAt: 10, Window: time.Minute}, SolveTime{Fastest: time.Second})
	e.Observe = func(v Verdict) { seen = append(seen, v) }
	ip := netip.MustParseAddr("203.0.113.1")
	judge(t, e, Signal{IP: ip, User: "a", At: t0})
	if v := judge(t, e, Signal{IP: ip, User: "b", At: t0}); v != (Verdict{Decision: Challenge, Rule: "accounts_per_ip"}) {
		t.Fatalf("second account: %+v", v)
	}
	if v := answer(t, e, Signal{IP: ip, User: "b", Solve: time.Millisecond}); v != (Verdict{Decision: Block, Rule: "solve_time"}) {
		t.Fatalf("instant answer: %+v", v)
	}
	if len(seen) != 2 {
		t.Fatalf("observed %v, want the two non-allow verdicts", seen)
	}
	var none *Engine
	if v := judge(t, none, Signal{}); v.Decision != Allow {
		t.Fatalf("a nil engine: %+v, want allow", v)
	}
}

// judge is e's verdict on the grab s, which must not fail.
func judge(t testing.TB, e *Engine, s Signal) Verdict {
	t.Helper()
	v, err := e.Grab(context.Background(), s)
	if err != nil {
		t.Fatalf("grab %+v: %v", s, err)
	}
	return v
}

// answer is e's verdict on the answer s, which must not fail.
func answer(t testing.TB, e *Engine, s Signal) Verdict {
	t.Helper()
	v, err := e.Answer(context.Background(), s)
	if err != nil {
		t.Fatalf("answer %+v: %v", s, err)
	}
	return v
}
