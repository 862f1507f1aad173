package saletest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"seckill/internal/sale"
)

// GateItem is an item activity open from 12:00 to 13:00 on 2001-11-30.
func GateItem(id string, stock, limit int64) sale.Activity {
	return sale.Activity{ID: id, Name: id, Kind: sale.KindItem, Stock: stock, PriceCents: 100, PerUserLimit: limit,
		StartAt: T0, EndAt: T0.Add(time.Hour), PayWindow: time.Minute, Admission: sale.AdmitDirect, Revision: 1}
}

// GateTests checks the rules every sale.Gate keeps, whatever it runs on. newGate returns a gate
// that holds no activity yet; activity ids are unique across the subtests, so one gate (one
// Redis) may serve them all.
func GateTests(t *testing.T, newGate func(t *testing.T) sale.Gate) {
	t.Run("Rules", func(t *testing.T) { gateRules(t, newGate) })
	t.Run("ActivityNotLoaded", func(t *testing.T) {
		// The gate is handed each activity whole and keeps none of its own, so it cannot tell
		// one never created (the service's store answers that) from one it lost: either way
		// it does not hold it, and says so, taking nothing.
		g := newGate(t)
		if _, err := g.Grab(context.Background(), GateItem("nope", 1, 1), sale.GrabRequest{ActivityID: "nope", UserID: "u", Now: T0}); !absent(err) {
			t.Fatalf("got %v, want ErrNotFound or ErrUnloaded", err)
		}
	})
	t.Run("IdempotentRetry", func(t *testing.T) { gateIdempotentRetry(t, newGate(t)) })
	t.Run("KeyRemembersOnlyWins", func(t *testing.T) { gateKeyRemembersWins(t, newGate(t)) })
	t.Run("ReleaseRestocksOnce", func(t *testing.T) { gateReleaseOnce(t, newGate(t)) })
	t.Run("ReleaseAfterALoadRestocksOnce", func(t *testing.T) { gateReleaseAfterLoad(t, newGate(t)) })
	t.Run("LoadCountsHoldings", func(t *testing.T) { gateLoad(t, newGate(t)) })
	t.Run("RedPacketShares", func(t *testing.T) { gateRedPacket(t, newGate(t)) })
	t.Run("Crowd", func(t *testing.T) { gateCrowd(t, newGate(t)) })
	t.Run("Passes", func(t *testing.T) { gatePasses(t, newGate(t)) })
	t.Run("PassesSpentAlone", func(t *testing.T) { gateSpendPass(t, newGate(t)) })
	t.Run("Revisions", func(t *testing.T) { gateRevisions(t, newGate(t)) })
	t.Run("Waves", func(t *testing.T) { gateWaves(t, newGate(t)) })
}

// gateWaves: a reservation sale's grab waits until the gate holds the whole set of reservers
// (sealed), then is refused to anyone not among them and to a reserver before their wave
// opens, taking nothing, and admitted from then as any grab; a load leaves the set, a drop
// forgets it.
func gateWaves(t *testing.T, g sale.Gate) {
	ctx := context.Background()
	a := GateItem("wv", 100, 1)
	a.Admission, a.ReserveFrom, a.Waves, a.WaveInterval, a.WaveOrder = sale.AdmitReservation, T0.Add(-time.Hour), 3,
		10*time.Minute, sale.WaveByNumber
	a.StockShards = 3 // a gate that splits stocks keeps each reserver on their home shard
	load(t, g, a, sale.GateState{})
	grab := func(user string, at time.Time) error {
		t.Helper()
		_, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: user, IdempotencyKey: "k-" + user, Now: at})
		return err
	}
	sealed := func(want bool) {
		t.Helper()
		if got, err := g.WavesSealed(ctx, a); err != nil || got != want {
			t.Fatalf("WavesSealed = %v, %v; want %v", got, err, want)
		}
	}
	notYet := func(err error) bool {
		var w sale.WaveNotOpen
		return errors.As(err, &w) && w.Wave == 0 && w.OpensAt.IsZero()
	}
	const reservers = 60
	waves := map[string]int64{}
	for i := range reservers {
		waves[fmt.Sprintf("u%02d", i)] = sale.WaveOf(int64(i), reservers, a.Waves)
	}
	sealed(false)
	if err := grab("u00", T0); !notYet(err) {
		t.Fatalf("a grab before the gate holds any reserver: %v; want a WaveNotOpen of no wave", err)
	}
	first, rest := map[string]int64{}, map[string]int64{}
	for u, w := range waves {
		if u < "u30" {
			first[u] = w
		} else {
			rest[u] = w
		}
	}
	if err := g.HoldWaves(ctx, a, first); err != nil {
		t.Fatal(err)
	}
	sealed(false)
	if err := grab("u00", T0); !notYet(err) {
		t.Fatalf("a grab while the set is being copied: %v; want a WaveNotOpen of no wave", err)
	}
	for _, step := range []func() error{
		func() error { return g.HoldWaves(ctx, a, rest) },
		func() error { return g.HoldWaves(ctx, a, first) }, // a copy made again
		func() error { return g.SealWaves(ctx, a, reservers) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	sealed(true)
	if err := grab("stranger", T0); !errors.Is(err, sale.ErrNotReserved) {
		t.Fatalf("a grab of someone not reserved: %v; want ErrNotReserved", err)
	}
	if err := grab("u25", T0.Add(time.Minute)); !errors.Is(err, sale.ErrWaveNotOpen) {
		t.Fatalf("a grab of wave 2 in wave 1: %v", err)
	} else if w := (sale.WaveNotOpen{}); !errors.As(err, &w) || w.Wave != 2 || !w.OpensAt.Equal(a.WaveOpens(2)) {
		t.Fatalf("a grab of wave 2 in wave 1: %+v; want wave 2 opening at %s", w, a.WaveOpens(2))
	}
	if got := remaining(t, g, a); got != 100 {
		t.Fatalf("the refusals took units: %d left of 100", got)
	}
	for i := range reservers { // each in the first second of their wave
		u := fmt.Sprintf("u%02d", i)
		if err := grab(u, a.WaveOpens(waves[u]).Add(time.Second)); err != nil {
			t.Fatalf("%s in their wave %d: %v", u, waves[u], err)
		}
	}
	if got := remaining(t, g, a); got != 100-reservers {
		t.Fatalf("%d left after %d reservers grabbed; want %d", got, reservers, 100-reservers)
	}
	load(t, g, a, sale.GateState{}) // a reload (a rebuild) leaves the set
	sealed(true)
	if err := grab("stranger", a.WaveOpens(3)); !errors.Is(err, sale.ErrNotReserved) {
		t.Fatalf("a stranger after a reload: %v; want ErrNotReserved", err)
	}
	if err := g.Drop(ctx, a); err != nil {
		t.Fatal(err)
	}
	sealed(false)
}

// gateRevisions: a revision is given once and in order, its units go on sale with it, and from
// then on a grab made on an older copy of the activity is refused as stale, taking nothing; a
// repair brings a gate that is behind to the repairer's revision, never back from a later one.
func gateRevisions(t *testing.T, g sale.Gate) {
	ctx := context.Background()
	a := GateItem("rv", 3, 5)
	a.StockShards = 3 // a gate that splits stocks gives every shard the revision
	load(t, g, a, sale.GateState{})
	at := func(rev int64) sale.Activity {
		b := a
		b.Revision = rev
		return b
	}
	grab := func(b sale.Activity, user string, now time.Time) error {
		t.Helper()
		_, err := g.Grab(ctx, b, sale.GrabRequest{ActivityID: b.ID, UserID: user, Now: now})
		return err
	}
	if err := grab(a, "u1", T0); err != nil {
		t.Fatal(err)
	}
	v2 := at(2)
	v2.Stock += 3
	for range 2 { // given twice: counted once
		if err := g.Revise(ctx, v2, 3); err != nil {
			t.Fatalf("Revise to 2: %v", err)
		}
	}
	if got := remaining(t, g, a); got != 5 {
		t.Fatalf("after 3 units added: %d remaining, want 5", got)
	}
	if err := grab(a, "u2", T0); !errors.Is(err, sale.ErrStale) {
		t.Fatalf("a grab on revision 1: %v, want ErrStale", err)
	}
	if got := remaining(t, g, a); got != 5 {
		t.Fatalf("a stale grab took a unit: %d remaining", got)
	}
	if err := grab(v2, "u2", T0); err != nil {
		t.Fatalf("a grab on revision 2: %v", err)
	}
	v4 := at(4)
	if err := g.Revise(ctx, v4, 0); !errors.Is(err, sale.ErrChanged) {
		t.Fatalf("revision 4 before 3: %v, want ErrChanged", err)
	}
	ended := at(3)
	ended.Stock, ended.EndAt = v2.Stock, T0.Add(time.Minute)
	if err := g.Revise(ctx, ended, 0); err != nil {
		t.Fatalf("Revise to 3 (ended): %v", err)
	}
	if err := grab(ended, "u3", T0.Add(2*time.Minute)); !errors.Is(err, sale.ErrEnded) {
		t.Fatalf("a grab after the end: %v, want ErrEnded", err)
	}
	if err := grab(v2, "u3", T0.Add(2*time.Minute)); !errors.Is(err, sale.ErrStale) {
		t.Fatalf("a grab on the copy from before the end: %v, want ErrStale", err)
	}
	if got := remaining(t, g, a); got != 4 {
		t.Fatalf("after the end: %d remaining, want 4", got)
	}
	if err := g.Revise(ctx, at(2), 0); err != nil {
		t.Fatalf("an old revision given again: %v, want nothing done", err)
	}
	if err := g.Revise(ctx, GateItem("rv-nope", 1, 1), 0); !absent(err) {
		t.Fatalf("Revise of an activity the gate does not hold: %v", err)
	}

	// A repair on a copy older than the gate's revision is refused; on a later one (a gate that
	// missed a revision) it brings the gate to it.
	held := []sale.Grab{{Token: "h1", ActivityID: a.ID, UserID: "u1", AmountCents: 100, At: T0},
		{Token: "h2", ActivityID: a.ID, UserID: "u2", AmountCents: 100, At: T0}}
	read := func(context.Context, int64) (sale.GateState, bool, error) {
		return sale.GateState{Held: held}, true, nil
	}
	if ok, err := g.Repair(ctx, v2, read); ok || err != nil && !errors.Is(err, sale.ErrChanged) {
		t.Fatalf("a repair on revision 2: %v, %v; want it refused", ok, err)
	}
	v5 := at(5)
	v5.Stock, v5.EndAt = 6, T0.Add(time.Hour)
	if ok, err := g.Repair(ctx, v5, read); !ok || err != nil {
		t.Fatalf("a repair on revision 5: %v, %v", ok, err)
	}
	if got := remaining(t, g, v5); got != 4 {
		t.Fatalf("after the repair: %d remaining, want 4 (6 less 2 held)", got)
	}
	if err := grab(v5, "u9", T0); err != nil {
		t.Fatalf("a grab on the repaired revision: %v", err)
	}
}

// gateSpendPass: a pass spent on its own (a line's join) is spent once, by its owner, on its
// activity, before it expires (someone else showing it leaves it to its owner); and a pass spent
// so is no good to a grab either.
func gateSpendPass(t *testing.T, g sale.Gate) {
	ctx := context.Background()
	a, b := GateItem("sp1", 5, 1), GateItem("sp2", 5, 1)
	a.RequireChallenge = true
	for _, x := range []sale.Activity{a, b} {
		load(t, g, x, sale.GateState{})
	}
	issue := func(user string, ttl time.Duration) string {
		t.Helper()
		tok := sale.NewToken("p")
		if err := g.IssuePass(ctx, a, user, tok, T0, T0.Add(ttl)); err != nil {
			t.Fatalf("IssuePass: %v", err)
		}
		return tok
	}
	alice, bob, carol := issue("alice", time.Minute), issue("bob", time.Second), issue("carol", time.Minute)
	at := T0.Add(500 * time.Millisecond)
	for _, s := range []struct {
		name       string
		activity   sale.Activity
		user, pass string
		now        time.Time
		want       error
	}{
		{"a made-up pass", a, "alice", "p-made-up", at, sale.ErrChallengeRequired},
		{"alice's pass on another activity", b, "alice", alice, at, sale.ErrChallengeRequired},
		{"alice's pass", a, "alice", alice, at, nil},
		{"alice's pass again", a, "alice", alice, at, sale.ErrChallengeRequired},
		{"bob's pass once expired", a, "bob", bob, T0.Add(time.Second), sale.ErrChallengeRequired},
		{"carol's pass by mallory", a, "mallory", carol, at, sale.ErrChallengeRequired},
	} {
		if err := g.SpendPass(ctx, s.activity, s.user, s.pass, s.now); !errors.Is(err, s.want) {
			t.Fatalf("%s: got %v, want %v", s.name, err, s.want)
		}
	}
	// An activity the gate does not hold has no pass of alice's: refused, as not held (the
	// memory gate) or as no such pass (Redis, whose passes live under the activity's keys).
	if err := g.SpendPass(ctx, GateItem("sp-none", 5, 1), "alice", alice, at); !absent(err) && !errors.Is(err, sale.ErrChallengeRequired) {
		t.Fatalf("alice's pass on an activity the gate does not hold: %v, want it refused", err)
	}
	if err := g.SpendPass(ctx, a, "carol", carol, at); err != nil {
		t.Fatalf("carol's pass after mallory showed it: %v; it is still hers", err)
	}
	dave := issue("dave", time.Minute)
	if err := g.SpendPass(ctx, a, "dave", dave, at); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: "sp1", UserID: "dave", Pass: dave, Now: at}); !errors.Is(err, sale.ErrChallengeRequired) {
		t.Fatalf("a grab with a pass spent by a join: %v, want ErrChallengeRequired", err)
	}
}

// gateKeyRemembersWins: an idempotency key remembers a win, not a refusal (docs/integrating.md,
// "Idempotency"): a key refused SOLD_OUT wins once a unit comes back, and then
// answers that win again without taking a second unit.
func gateKeyRemembersWins(t *testing.T, g sale.Gate) {
	ctx := context.Background()
	a := GateItem("kw", 1, 1)
	load(t, g, a, sale.GateState{})
	at := T0.Add(time.Second)
	first, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: "alice", IdempotencyKey: "a1", Now: at})
	if err != nil {
		t.Fatal(err)
	}
	bob := sale.GrabRequest{ActivityID: a.ID, UserID: "bob", IdempotencyKey: "b1", Now: at}
	if _, err := g.Grab(ctx, a, bob); !errors.Is(err, sale.ErrSoldOut) {
		t.Fatalf("bob's first try: %v, want ErrSoldOut", err)
	}
	if err := g.Release(ctx, a, first); err != nil {
		t.Fatal(err)
	}
	won, err := g.Grab(ctx, a, bob)
	if err != nil {
		t.Fatalf("bob's retry with his key after the restock: %v, want a win (a refusal is not remembered)", err)
	}
	again, err := g.Grab(ctx, a, bob)
	if err != nil || again.Token != won.Token {
		t.Fatalf("bob's key once it won: %+v, %v; want the win %s again", again, err, won.Token)
	}
	if n := remaining(t, g, a); n != 0 {
		t.Fatalf("remaining %d, want 0: bob's key took one unit", n)
	}
}

func load(t *testing.T, g sale.Gate, a sale.Activity, st sale.GateState) {
	t.Helper()
	if err := g.Load(context.Background(), a, st); err != nil {
		t.Fatalf("Load(%s): %v", a.ID, err)
	}
}

func remaining(t *testing.T, g sale.Gate, a sale.Activity) int64 {
	t.Helper()
	n, err := g.Remaining(context.Background(), a)
	if err != nil {
		t.Fatalf("Remaining(%s): %v", a.ID, err)
	}
	return n
}

// absent says err is a gate's "I do not hold this activity".
func absent(err error) bool {
	return errors.Is(err, sale.ErrNotFound) || errors.Is(err, sale.ErrUnloaded)
}

func gateRules(t *testing.T, newGate func(t *testing.T) sale.Gate) {
	type step struct {
		user, key string
		at        time.Time
		want      error
	}
	in := T0.Add(time.Minute)
	tests := []struct {
		name  string
		act   sale.Activity
		steps []step
	}{
		{"before the start", GateItem("r1", 5, 1), []step{{"u1", "", T0.Add(-time.Second), sale.ErrNotStarted}}},
		{"at the end", GateItem("r2", 5, 1), []step{{"u1", "", T0.Add(time.Hour), sale.ErrEnded}}},
		{"at the start", GateItem("r3", 5, 1), []step{{"u1", "", T0, nil}}},
		{"limit one", GateItem("r4", 5, 1), []step{{"u1", "", in, nil}, {"u1", "", in, sale.ErrAlreadyBought}, {"u2", "", in, nil}}},
		{"limit two", GateItem("r5", 5, 2), []step{{"u1", "", in, nil}, {"u1", "", in, nil}, {"u1", "", in, sale.ErrAlreadyBought}}},
		{"stock runs out", GateItem("r6", 2, 1), []step{{"u1", "", in, nil}, {"u2", "", in, nil}, {"u3", "", in, sale.ErrSoldOut}, {"u4", "k", in, sale.ErrSoldOut}}},
		{"a key repeats its first answer", GateItem("r7", 1, 1), []step{{"u1", "k", in, nil}, {"u1", "k", in, nil}, {"u2", "", in, sale.ErrSoldOut}}},
		{"a new key still counts against the limit", GateItem("r8", 5, 1), []step{{"u1", "k1", in, nil}, {"u1", "k2", in, sale.ErrAlreadyBought}}},
		{"keys are per user", GateItem("r9", 5, 1), []step{{"u1", "k", in, nil}, {"u2", "k", in, nil}}},
		{"user ids are case-sensitive", GateItem("r10", 5, 1), []step{{"alice", "", in, nil}, {"Alice", "", in, nil}}},
	}
	g := newGate(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			load(t, g, tc.act, sale.GateState{})
			for i, s := range tc.steps {
				_, err := g.Grab(context.Background(), tc.act, sale.GrabRequest{ActivityID: tc.act.ID, UserID: s.user, IdempotencyKey: s.key, Now: s.at})
				if !errors.Is(err, s.want) || (s.want == nil && err != nil) {
					t.Fatalf("step %d (%s, key %q): got %v, want %v", i, s.user, s.key, err, s.want)
				}
			}
		})
	}
}

func gateIdempotentRetry(t *testing.T, g sale.Gate) {
	a := GateItem("idem", 10, 3)
	load(t, g, a, sale.GateState{})
	req := sale.GrabRequest{ActivityID: "idem", UserID: "u1", IdempotencyKey: "k", Now: T0}
	first, err := g.Grab(context.Background(), a, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := g.Grab(context.Background(), a, req)
	if err != nil || again != first {
		t.Fatalf("retry = %+v, %v; want the first grab %+v", again, err, first)
	}
	if rem := remaining(t, g, a); rem != 9 {
		t.Fatalf("remaining = %d after a grab and its retry, want 9", rem)
	}
}

func gateReleaseOnce(t *testing.T, g sale.Gate) {
	a := GateItem("rel", 1, 1)
	load(t, g, a, sale.GateState{})
	ctx := context.Background()
	grab, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: "rel", UserID: "u1", Now: T0})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 { // sweepers of several nodes racing
		wg.Go(func() {
			if err := g.Release(ctx, a, grab); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if rem := remaining(t, g, a); rem != 1 {
		t.Fatalf("remaining = %d after releasing one grab eight times, want 1", rem)
	}
	// The buyer is released too: u1 may buy again, and the unit is sold once more.
	if _, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: "rel", UserID: "u1", Now: T0}); err != nil {
		t.Fatalf("regrab after release: %v", err)
	}
	if _, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: "rel", UserID: "u2", Now: T0}); !errors.Is(err, sale.ErrSoldOut) {
		t.Fatalf("grab after resale: got %v, want ErrSoldOut", err)
	}
}

// gateReleaseAfterLoad: a release repeated after the gate was loaded again (a reconcile, a
// rebuild), by a buyer who still holds another unit, gives nothing back a second time.
func gateReleaseAfterLoad(t *testing.T, g sale.Gate) {
	a := GateItem("rel2", 3, 2)
	load(t, g, a, sale.GateState{})
	ctx := context.Background()
	var grabs []sale.Grab
	for range 2 {
		gr, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: "u1", Now: T0})
		if err != nil {
			t.Fatal(err)
		}
		grabs = append(grabs, gr)
	}
	if err := g.Release(ctx, a, grabs[0]); err != nil {
		t.Fatal(err)
	}
	// What the database holds now: the second grab only, the first order cancelled.
	load(t, g, a, sale.GateState{Held: grabs[1:]})
	if err := g.Release(ctx, a, grabs[0]); err != nil {
		t.Fatal(err)
	}
	if rem := remaining(t, g, a); rem != 2 {
		t.Fatalf("remaining = %d after one release repeated across a load, want 2", rem)
	}
	if err := g.Release(ctx, a, grabs[1]); err != nil {
		t.Fatal(err)
	}
	if rem := remaining(t, g, a); rem != 3 {
		t.Fatalf("remaining = %d after releasing the loaded holding too, want 3", rem)
	}
}

func gateLoad(t *testing.T, g sale.Gate) {
	held := []sale.Grab{{Token: "g1", ActivityID: "ld", UserID: "u1", At: T0},
		{Token: "g2", ActivityID: "ld", UserID: "u2", IdempotencyKey: "k", AmountCents: 100, At: T0}}
	a := GateItem("ld", 3, 1)
	load(t, g, a, sale.GateState{Held: held, Keyed: held[1:]})
	ctx := context.Background()
	if rem := remaining(t, g, a); rem != 1 {
		t.Fatalf("remaining = %d, want 1", rem)
	}
	if _, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: "ld", UserID: "u1", Now: T0}); !errors.Is(err, sale.ErrAlreadyBought) {
		t.Fatalf("u1 regrab: got %v, want ErrAlreadyBought", err)
	}
	got, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: "ld", UserID: "u2", IdempotencyKey: "k", Now: T0})
	if err != nil || got.Token != "g2" {
		t.Fatalf("u2 retry of key k = %+v, %v; want grab g2", got, err)
	}
	// A loaded holding can be released, once.
	for range 2 {
		if err := g.Release(ctx, a, held[0]); err != nil {
			t.Fatal(err)
		}
	}
	if rem := remaining(t, g, a); rem != 2 {
		t.Fatalf("remaining = %d after releasing a loaded holding, want 2", rem)
	}
	if err := g.Load(ctx, GateItem("ld2", 1, 1), sale.GateState{Held: held}); err == nil {
		t.Fatal("Load with more units held than stock succeeded")
	}
}

func gateRedPacket(t *testing.T, g sale.Gate) {
	a := GateItem("rp", 3, 1)
	a.Kind, a.PriceCents, a.TotalCents = sale.KindRedPacket, 0, 600
	shares := []sale.Share{{Index: 0, AmountCents: 100}, {Index: 1, AmountCents: 200}, {Index: 2, AmountCents: 300}}
	load(t, g, a, sale.GateState{Shares: shares})
	ctx := context.Background()
	var sum int64
	seen := map[int64]bool{}
	var first sale.Grab
	for i := range 3 {
		got, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: "rp", UserID: fmt.Sprint("u", i), Now: T0})
		if err != nil {
			t.Fatal(err)
		}
		if seen[got.Share] {
			t.Fatalf("share %d handed out twice", got.Share)
		}
		if i == 0 {
			first = got
		}
		seen[got.Share] = true
		sum += got.AmountCents
	}
	if sum != 600 {
		t.Fatalf("shares won sum to %d, want 600", sum)
	}
	if _, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: "rp", UserID: "late", Now: T0}); !errors.Is(err, sale.ErrSoldOut) {
		t.Fatalf("fourth grab: got %v, want ErrSoldOut", err)
	}
	if err := g.Release(ctx, a, first); err != nil {
		t.Fatal(err)
	}
	again, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: "rp", UserID: "late", Now: T0})
	if err != nil || again.Share != first.Share || again.AmountCents != first.AmountCents {
		t.Fatalf("grab after a release = %+v, %v; want the released share %d (%d cents)", again, err, first.Share, first.AmountCents)
	}
}

// gateCrowd has thousands of goroutines grab at once, each user several times, some with
// idempotency keys: the stock is sold exactly, never twice to a user.
func gateCrowd(t *testing.T, g sale.Gate) {
	const users, clicks, stock = 3000, 3, 500
	a := GateItem("crowd", stock, 1)
	load(t, g, a, sale.GateState{})
	var mu sync.Mutex
	wins := map[string]string{} // user -> token
	var wg sync.WaitGroup
	for u := range users {
		for c := range clicks {
			wg.Go(func() {
				user := fmt.Sprint("u", u)
				key := ""
				if u%2 == 0 {
					key = "k"
				}
				got, err := g.Grab(context.Background(), a, sale.GrabRequest{ActivityID: "crowd", UserID: user, IdempotencyKey: key, Now: T0})
				switch {
				case err == nil:
					mu.Lock()
					defer mu.Unlock()
					if prev, ok := wins[user]; ok && prev != got.Token {
						t.Errorf("user %s won twice: %s and %s (click %d)", user, prev, got.Token, c)
					}
					wins[user] = got.Token
				case errors.Is(err, sale.ErrSoldOut), errors.Is(err, sale.ErrAlreadyBought):
				default:
					t.Errorf("grab: %v", err)
				}
			})
		}
	}
	wg.Wait()
	if len(wins) != stock {
		t.Fatalf("%d users won, want exactly the stock %d", len(wins), stock)
	}
	if rem := remaining(t, g, a); rem != 0 {
		t.Fatalf("remaining = %d, want 0", rem)
	}
}

// gatePasses checks the one-time path tokens: required where the activity says so, spent by the
// grab that carries one whatever its outcome, bound to one user and one activity, and expiring.
func gatePasses(t *testing.T, g sale.Gate) {
	ctx := context.Background()
	guarded := GateItem("ps1", 2, 1)
	guarded.RequireChallenge = true
	other := GateItem("ps2", 5, 1)
	other.RequireChallenge = true
	open := GateItem("ps3", 5, 1)
	for _, a := range []sale.Activity{guarded, other, open} {
		load(t, g, a, sale.GateState{})
	}
	issue := func(a sale.Activity, user string, ttl time.Duration) string {
		t.Helper()
		tok := sale.NewToken("p")
		if err := g.IssuePass(ctx, a, user, tok, T0, T0.Add(ttl)); err != nil {
			t.Fatalf("IssuePass: %v", err)
		}
		return tok
	}
	alice := issue(guarded, "alice", time.Minute)
	late := issue(guarded, "bob", time.Second)
	keyed := issue(guarded, "carol", time.Minute)
	stray := issue(open, "dave", time.Minute)
	at := T0.Add(500 * time.Millisecond)
	steps := []struct {
		name string
		req  sale.GrabRequest
		want error
	}{
		{"a bare grab", sale.GrabRequest{ActivityID: "ps1", UserID: "alice"}, sale.ErrChallengeRequired},
		{"a made-up pass", sale.GrabRequest{ActivityID: "ps1", UserID: "alice", Pass: "p-made-up"}, sale.ErrChallengeRequired},
		{"alice's pass used by mallory", sale.GrabRequest{ActivityID: "ps1", UserID: "mallory", Pass: alice}, sale.ErrChallengeRequired},
		{"alice's pass on another activity", sale.GrabRequest{ActivityID: "ps2", UserID: "alice", Pass: alice}, sale.ErrChallengeRequired},
		{"alice's pass", sale.GrabRequest{ActivityID: "ps1", UserID: "alice", Pass: alice}, nil},
		{"alice's pass replayed", sale.GrabRequest{ActivityID: "ps1", UserID: "alice", Pass: alice}, sale.ErrChallengeRequired},
		{"bob's pass after it expired", sale.GrabRequest{ActivityID: "ps1", UserID: "bob", Pass: late, Now: T0.Add(time.Second)}, sale.ErrChallengeRequired},
		{"carol's pass with a key", sale.GrabRequest{ActivityID: "ps1", UserID: "carol", Pass: keyed, IdempotencyKey: "k"}, nil},
		{"carol's retry owed its first answer", sale.GrabRequest{ActivityID: "ps1", UserID: "carol", Pass: keyed, IdempotencyKey: "k"}, nil},
		{"a pass on an open activity is checked too", sale.GrabRequest{ActivityID: "ps3", UserID: "erin", Pass: stray}, sale.ErrChallengeRequired},
		{"a bare grab on an open activity", sale.GrabRequest{ActivityID: "ps3", UserID: "erin"}, nil},
		{"dave's pass on the open activity", sale.GrabRequest{ActivityID: "ps3", UserID: "dave", Pass: stray}, nil},
	}
	acts := map[string]sale.Activity{guarded.ID: guarded, other.ID: other, open.ID: open}
	for _, s := range steps {
		if s.req.Now.IsZero() {
			s.req.Now = at
		}
		if _, err := g.Grab(ctx, acts[s.req.ActivityID], s.req); !errors.Is(err, s.want) {
			t.Fatalf("%s: got %v, want %v", s.name, err, s.want)
		}
	}
	if rem := remaining(t, g, guarded); rem != 0 {
		t.Fatalf("ps1 remaining %d, want 0: alice and carol hold the two units", rem)
	}
	// A pass is spent even when the grab it carried finds nothing left.
	frank := issue(guarded, "frank", time.Minute)
	for _, want := range []error{sale.ErrSoldOut, sale.ErrChallengeRequired} {
		if _, err := g.Grab(ctx, guarded, sale.GrabRequest{ActivityID: "ps1", UserID: "frank", Pass: frank, Now: at}); !errors.Is(err, want) {
			t.Fatalf("frank's pass on a sold-out sale: got %v, want %v", err, want)
		}
	}
}
