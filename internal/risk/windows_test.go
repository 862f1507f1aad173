package risk

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// nodes returns two engines, two nodes of a cluster, with the rules of 3 accounts per address
// and the cadence: on one store both count in (shared), or each on its own windows.
func nodes(shared bool) [2]*Engine {
	one := NewMemoryWindows(time.Minute)
	var out [2]*Engine
	for i := range out {
		w := one
		if !shared {
			w = NewMemoryWindows(time.Minute)
		}
		e, err := Open(Options{Windows: w, Rules: []Rule{
			&AccountsPerIP{ChallengeAbove: 3, BlockAt: 6, Window: time.Minute},
			&Cadence{Clicks: 8, Slowest: 5 * time.Second, Jitter: 0.05},
		}})
		if err != nil {
			panic(err)
		}
		out[i] = e
	}
	return out
}

// TestRulesJudgeByTheSharedWindows: a farm of accounts on one address, and one script clicking
// at a machine's beat, each spread over two nodes by the load balancer. On windows the nodes
// share, the fourth account is challenged and the sixth blocked, and the script's eighth click
// challenged, as one node would; on windows of their own, each node sees half and lets them all
// through.
func TestRulesJudgeByTheSharedWindows(t *testing.T) {
	farm := netip.MustParseAddr("203.0.113.9")
	for _, shared := range []bool{true, false} {
		n := nodes(shared)
		var got []Decision
		for i := range 6 {
			got = append(got, judge(t, n[i%2], Signal{IP: farm, User: fmt.Sprint("acct-", i), At: t0.Add(time.Duration(i) * time.Second)}).Decision)
		}
		want := []Decision{Allow, Allow, Allow, Challenge, Challenge, Block}
		if !shared {
			want = []Decision{Allow, Allow, Allow, Allow, Allow, Allow}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("shared %v: six accounts of one address over two nodes: %v, want %v", shared, got, want)
		}
		// A user's beat is each node's own, shared windows or not (counting every click there
		// cost a Redis call a grab): spread over two nodes, each has half of it; on one, it shows.
		var spread, one Decision
		for i := range 8 {
			spread = judge(t, n[i%2], Signal{User: "script", At: t0.Add(time.Duration(i) * 200 * time.Millisecond)}).Decision
			one = judge(t, n[0], Signal{User: "bot", At: t0.Add(time.Duration(i) * 200 * time.Millisecond)}).Decision
		}
		if spread != Allow || one != Challenge {
			t.Errorf("shared %v: the eighth click on a 200 ms beat: %v over two nodes, %v on one; want allow (4 clicks each), challenge", shared, spread, one)
		}
	}
}

// TestModelReadsTheSharedWindows: with shared windows the features are the cluster's: the
// accounts and requests of an address and of a fingerprint, the replays and the user's clicks
// from both nodes, and a solve on one node is a feature of the grab on the other.
func TestModelReadsTheSharedWindows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rec.jsonl")
	rec, err := OpenRecorder(path)
	if err != nil {
		t.Fatal(err)
	}
	w := NewMemoryWindows(time.Minute)
	var n [2]*Engine
	for i := range n {
		if n[i], err = Open(Options{Features: NewFeatures(time.Minute, nil), Windows: w, Recorder: rec}); err != nil {
			t.Fatal(err)
		}
	}
	ip := netip.MustParseAddr("203.0.113.9")
	for i, u := range []string{"a", "b", "c", "a"} {
		judge(t, n[i%2], Signal{IP: ip, User: u, At: t0.Add(time.Duration(i) * time.Second), Page: human("00112233445566778899aabbccddeeff")})
	}
	answer(t, n[0], Signal{User: "a", At: t0.Add(5 * time.Second), Solve: 3 * time.Second})
	judge(t, n[1], Signal{IP: ip, User: "a", At: t0.Add(6 * time.Second)})
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ls, err := ReadRecords(f)
	if err != nil || len(ls) != 5 {
		t.Fatalf("records %v, %v", ls, err)
	}
	want := map[string]float64{"ip_requests": math.Log1p(4), "ip_users": math.Log1p(3), "fp_requests": math.Log1p(4),
		"fp_users": math.Log1p(3), "signal_replays": math.Log1p(3), "user_clicks": math.Log1p(2)}
	for name, x := range want {
		if got := ls[3].Features[name]; got != x {
			t.Errorf("the fourth grab, on the second node: %s = %v, want %v", name, got, x)
		}
	}
	if f := ls[4].Features; f["solved"] != 1 || f["solve_time"] != math.Log1p(3) || f["user_clicks"] != math.Log1p(3) {
		t.Errorf("the grab after a solve on the other node: %v", f)
	}
}

// failing windows fail every call.
type failing struct{}

var errDown = errors.New("the store is down")

func (failing) Count(context.Context, Keys, time.Time) (Seen, error)           { return Seen{}, errDown }
func (failing) Solved(context.Context, string, time.Duration, time.Time) error { return errDown }

// TestSharedWindowsThatFail: a grab the windows cannot count is not judged (the caller answers
// BUSY), nor a solve they cannot record; an engine whose rules count nothing does not call them.
func TestSharedWindowsThatFail(t *testing.T) {
	e, err := Open(Options{Windows: failing{}, Rules: []Rule{&AccountsPerIP{ChallengeAbove: 3, BlockAt: 6, Window: time.Minute}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Grab(context.Background(), Signal{IP: netip.MustParseAddr("203.0.113.9"), User: "a", At: t0}); !errors.Is(err, errDown) {
		t.Fatalf("a grab on failing windows: %v, want their error", err)
	}
	rec, err := OpenRecorder(filepath.Join(t.TempDir(), "rec.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	m, err := Open(Options{Windows: failing{}, Features: NewFeatures(0, nil), Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Answer(context.Background(), Signal{User: "a", At: t0, Solve: time.Second}); !errors.Is(err, errDown) {
		t.Fatalf("a solve on failing windows: %v, want their error", err)
	}
	solve, err := Open(Options{Windows: failing{}, Rules: []Rule{SolveTime{Fastest: time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := solve.Grab(context.Background(), Signal{User: "a", At: t0}); err != nil || v.Decision != Allow {
		t.Fatalf("rules that count nothing: %+v, %v, want allow without calling the windows", v, err)
	}
}

// keysSeen records the keys of every count, on the windows it wraps.
type keysSeen struct {
	Windows
	keys []Keys
}

func (w *keysSeen) Count(ctx context.Context, k Keys, at time.Time) (Seen, error) {
	w.keys = append(w.keys, k)
	return w.Windows.Count(ctx, k, at)
}

// TestEngineCountsWhatItReads: a grab is counted in the shared windows its rules read, and only
// those (the cadence alone, a node's default, judges the clicks the node saw: no shared window,
// no Redis call); with a model, in all of them. The windows remember as many accounts per address as the rules weigh
// (64 at least, the features').
func TestEngineCountsWhatItReads(t *testing.T) {
	ip := netip.MustParseAddr("203.0.113.9")
	s := Signal{IP: ip, User: "ann", At: t0, Page: human("00112233445566778899aabbccddeeff")}
	for _, c := range []struct {
		name string
		o    Options
		want Keys
	}{
		{"cadence", Options{Rules: []Rule{&Cadence{Slowest: time.Second, Jitter: 0.05}}}, Keys{}},
		{"accounts per address", Options{Rules: []Rule{&AccountsPerIP{ChallengeAbove: 3, BlockAt: 6, Window: time.Minute}}},
			Keys{IP: ip.String(), User: "ann", MaxUsers: 64}},
		{"a block past 64 accounts", Options{Rules: []Rule{&AccountsPerIP{ChallengeAbove: 20, BlockAt: 100, Window: time.Minute}}},
			Keys{IP: ip.String(), User: "ann", MaxUsers: 100}},
		{"features", Options{Features: NewFeatures(0, nil), Rules: []Rule{&Cadence{Slowest: time.Second, Jitter: 0.05}},
			Recorder: &Recorder{err: errDown}}, func() Keys { k := keysOf(s, true); k.MaxUsers = 64; return k }()}, // a recorder that writes nothing
	} {
		w := &keysSeen{Windows: NewMemoryWindows(0)}
		c.o.Windows = w
		e, err := Open(c.o)
		if err != nil {
			t.Fatal(err)
		}
		judge(t, e, s)
		switch {
		case c.want == Keys{} && len(w.keys) != 0:
			t.Errorf("%s: counted under %+v, want not counted in the shared windows", c.name, w.keys)
		case c.want != Keys{} && (len(w.keys) != 1 || w.keys[0] != c.want):
			t.Errorf("%s: counted under %+v, want once under %+v", c.name, w.keys, c.want)
		}
	}
	if w := keysOf(s, true); w.Fingerprint == "" || w.Replay == "" || !w.Clicks || w.IP == "" {
		t.Errorf("the features' keys %+v: want every window", w)
	}
}
