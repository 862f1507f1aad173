package memory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"seckill/internal/sale"
)

// fakeJournal records appended grabs in memory and fails while fail is set. The SQLite journal
// is tested in sqlstore and end to end; here it would only slow the gate's logic tests.
type fakeJournal struct {
	mu      sync.Mutex
	grabs   []sale.Grab
	batches int
	fail    error
}

func (j *fakeJournal) AppendGrabs(ctx context.Context, gs []sale.Grab) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.fail != nil {
		return j.fail
	}
	j.grabs = append(j.grabs, gs...)
	j.batches++
	return nil
}

func (j *fakeJournal) setFail(err error) { j.mu.Lock(); j.fail = err; j.mu.Unlock() }

func (j *fakeJournal) appended() []sale.Grab {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]sale.Grab(nil), j.grabs...)
}

func (j *fakeJournal) QueuedGrabs(context.Context, int64, int) ([]sale.Delivery, error) {
	return nil, nil
}
func (j *fakeJournal) RemoveGrabs(context.Context, []string) error { return nil }
func (j *fakeJournal) QueuedGrab(context.Context, string) (sale.Grab, error) {
	return sale.Grab{}, sale.ErrNotFound
}
func (j *fakeJournal) QueueDepth(context.Context, string) (int64, error)         { return 0, nil }
func (j *fakeJournal) UnackedGrabs(context.Context, string) ([]sale.Grab, error) { return nil, nil }

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func item(id string, stock, limit int64) sale.Activity {
	return sale.Activity{ID: id, Name: id, Kind: sale.KindItem, Stock: stock, PriceCents: 100, PerUserLimit: limit,
		StartAt: t0, EndAt: t0.Add(time.Hour), PayWindow: time.Minute, Admission: sale.AdmitDirect}
}

func newGate(t *testing.T) (*Gate, *fakeJournal) {
	t.Helper()
	j := &fakeJournal{}
	g := NewGate(j, 64, nil)
	t.Cleanup(func() { g.Close() })
	return g, j
}

func load(t *testing.T, g *Gate, a sale.Activity, st sale.GateState) {
	t.Helper()
	if err := g.Load(context.Background(), a, st); err != nil {
		t.Fatalf("Load(%s): %v", a.ID, err)
	}
}

func TestGrabRules(t *testing.T) {
	type step struct {
		user, key string
		at        time.Time
		want      error
	}
	in := t0.Add(time.Minute)
	tests := []struct {
		name  string
		act   sale.Activity
		steps []step
	}{
		{"before the start", item("a", 5, 1), []step{{"u1", "", t0.Add(-time.Second), sale.ErrNotStarted}}},
		{"at the end", item("a", 5, 1), []step{{"u1", "", t0.Add(time.Hour), sale.ErrEnded}}},
		{"at the start", item("a", 5, 1), []step{{"u1", "", t0, nil}}},
		{"limit one", item("a", 5, 1), []step{{"u1", "", in, nil}, {"u1", "", in, sale.ErrAlreadyBought}, {"u2", "", in, nil}}},
		{"limit two", item("a", 5, 2), []step{{"u1", "", in, nil}, {"u1", "", in, nil}, {"u1", "", in, sale.ErrAlreadyBought}}},
		{"stock runs out", item("a", 2, 1), []step{{"u1", "", in, nil}, {"u2", "", in, nil}, {"u3", "", in, sale.ErrSoldOut}, {"u4", "k", in, sale.ErrSoldOut}}},
		{"a key repeats its first answer", item("a", 1, 1), []step{{"u1", "k", in, nil}, {"u1", "k", in, nil}, {"u2", "", in, sale.ErrSoldOut}}},
		{"a new key still counts against the limit", item("a", 5, 1), []step{{"u1", "k1", in, nil}, {"u1", "k2", in, sale.ErrAlreadyBought}}},
		{"keys are per user", item("a", 5, 1), []step{{"u1", "k", in, nil}, {"u2", "k", in, nil}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := newGate(t)
			load(t, g, tc.act, sale.GateState{})
			for i, s := range tc.steps {
				_, err := g.Grab(context.Background(), sale.GrabRequest{ActivityID: tc.act.ID, UserID: s.user, IdempotencyKey: s.key, Now: s.at})
				if !errors.Is(err, s.want) || (s.want == nil && err != nil) {
					t.Fatalf("step %d (%s, key %q): got %v, want %v", i, s.user, s.key, err, s.want)
				}
			}
		})
	}
}

func TestGrabUnknownActivity(t *testing.T) {
	g, _ := newGate(t)
	_, err := g.Grab(context.Background(), sale.GrabRequest{ActivityID: "nope", UserID: "u", Now: t0})
	if !errors.Is(err, sale.ErrNotFound) {
		t.Fatalf("got %v, want ErrNotFound", err)
	}
}

func TestIdempotentRetryReturnsTheFirstGrab(t *testing.T) {
	g, j := newGate(t)
	load(t, g, item("a", 10, 3), sale.GateState{})
	req := sale.GrabRequest{ActivityID: "a", UserID: "u1", IdempotencyKey: "k", Now: t0}
	first, err := g.Grab(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := g.Grab(context.Background(), req)
	if err != nil || again != first {
		t.Fatalf("retry = %+v, %v; want the first grab %+v", again, err, first)
	}
	if rem, _ := g.Remaining(context.Background(), "a"); rem != 9 {
		t.Fatalf("remaining = %d after a grab and its retry, want 9", rem)
	}
	if n := len(j.appended()); n != 1 {
		t.Fatalf("journal has %d grabs, want 1", n)
	}
}

func TestJournalFailureGivesTheUnitBack(t *testing.T) {
	g, j := newGate(t)
	load(t, g, item("a", 1, 1), sale.GateState{})
	j.setFail(errors.New("disk full"))
	req := sale.GrabRequest{ActivityID: "a", UserID: "u1", IdempotencyKey: "k", Now: t0}
	if _, err := g.Grab(context.Background(), req); !errors.Is(err, sale.ErrBusy) {
		t.Fatalf("grab with a failing journal: got %v, want ErrBusy", err)
	}
	if rem, _ := g.Remaining(context.Background(), "a"); rem != 1 {
		t.Fatalf("remaining = %d after a refused grab, want 1", rem)
	}
	j.setFail(nil)
	// The same key is tried afresh: the refused grab gave no answer to repeat.
	got, err := g.Grab(context.Background(), req)
	if err != nil {
		t.Fatalf("retry after the journal recovered: %v", err)
	}
	if n := len(j.appended()); n != 1 || j.appended()[0].Token != got.Token {
		t.Fatalf("journal = %+v, want just %s", j.appended(), got.Token)
	}
}

func TestReleaseRestocksOnce(t *testing.T) {
	g, _ := newGate(t)
	load(t, g, item("a", 1, 1), sale.GateState{})
	ctx := context.Background()
	grab, err := g.Grab(ctx, sale.GrabRequest{ActivityID: "a", UserID: "u1", Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := g.Release(ctx, grab); err != nil {
			t.Fatal(err)
		}
	}
	if rem, _ := g.Remaining(ctx, "a"); rem != 1 {
		t.Fatalf("remaining = %d after releasing one grab three times, want 1", rem)
	}
	// The buyer is released too: u1 may buy again, and the unit is sold once more.
	if _, err := g.Grab(ctx, sale.GrabRequest{ActivityID: "a", UserID: "u1", Now: t0}); err != nil {
		t.Fatalf("regrab after release: %v", err)
	}
	if _, err := g.Grab(ctx, sale.GrabRequest{ActivityID: "a", UserID: "u2", Now: t0}); !errors.Is(err, sale.ErrSoldOut) {
		t.Fatalf("grab after resale: got %v, want ErrSoldOut", err)
	}
}

func TestLoadCountsHoldings(t *testing.T) {
	g, _ := newGate(t)
	held := []sale.Grab{{Token: "g1", ActivityID: "a", UserID: "u1"}, {Token: "g2", ActivityID: "a", UserID: "u2", IdempotencyKey: "k"}}
	load(t, g, item("a", 3, 1), sale.GateState{Held: held, Keyed: held[1:]})
	ctx := context.Background()
	if rem, _ := g.Remaining(ctx, "a"); rem != 1 {
		t.Fatalf("remaining = %d, want 1", rem)
	}
	if _, err := g.Grab(ctx, sale.GrabRequest{ActivityID: "a", UserID: "u1", Now: t0}); !errors.Is(err, sale.ErrAlreadyBought) {
		t.Fatalf("u1 regrab: got %v, want ErrAlreadyBought", err)
	}
	got, err := g.Grab(ctx, sale.GrabRequest{ActivityID: "a", UserID: "u2", IdempotencyKey: "k", Now: t0})
	if err != nil || got.Token != "g2" {
		t.Fatalf("u2 retry of key k = %+v, %v; want grab g2", got, err)
	}
	if err := g.Load(ctx, item("b", 1, 1), sale.GateState{Held: held}); err == nil {
		t.Fatal("Load with more units held than stock succeeded")
	}
}

func TestRedPacketSharesGoOutOnceEach(t *testing.T) {
	g, _ := newGate(t)
	a := item("rp", 3, 1)
	a.Kind, a.PriceCents, a.TotalCents = sale.KindRedPacket, 0, 600
	shares := []sale.Share{{Index: 0, AmountCents: 100}, {Index: 1, AmountCents: 200}, {Index: 2, AmountCents: 300}}
	load(t, g, a, sale.GateState{Shares: shares})
	ctx := context.Background()
	var sum int64
	seen := map[int64]bool{}
	for i := range 3 {
		got, err := g.Grab(ctx, sale.GrabRequest{ActivityID: "rp", UserID: fmt.Sprint("u", i), Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		if seen[got.Share] {
			t.Fatalf("share %d handed out twice", got.Share)
		}
		seen[got.Share] = true
		sum += got.AmountCents
	}
	if sum != 600 {
		t.Fatalf("shares won sum to %d, want 600", sum)
	}
	if _, err := g.Grab(ctx, sale.GrabRequest{ActivityID: "rp", UserID: "late", Now: t0}); !errors.Is(err, sale.ErrSoldOut) {
		t.Fatalf("fourth grab: got %v, want ErrSoldOut", err)
	}
}

// TestCrowd has thousands of goroutines grab at once, each user several times, some with
// idempotency keys: the stock is sold exactly, never twice to a user, and the journal holds
// exactly the grants.
func TestCrowd(t *testing.T) {
	const users, clicks, stock = 3000, 3, 500
	g, j := newGate(t)
	load(t, g, item("a", stock, 1), sale.GateState{})
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
				got, err := g.Grab(context.Background(), sale.GrabRequest{ActivityID: "a", UserID: user, IdempotencyKey: key, Now: t0})
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
	journal := j.appended()
	if len(journal) != stock {
		t.Fatalf("journal has %d grabs, want %d", len(journal), stock)
	}
	for _, gr := range journal {
		if wins[gr.UserID] != gr.Token {
			t.Fatalf("journal grab %s of %s is not the win the user was told (%s)", gr.Token, gr.UserID, wins[gr.UserID])
		}
	}
	if j.batches >= stock {
		t.Errorf("%d grabs took %d journal transactions: no group commit", stock, j.batches)
	}
	if rem, _ := g.Remaining(context.Background(), "a"); rem != 0 {
		t.Fatalf("remaining = %d, want 0", rem)
	}
}

func TestCloseFlushesAndRefuses(t *testing.T) {
	j := &fakeJournal{}
	g := NewGate(j, 8, nil)
	load(t, g, item("a", 100, 1), sale.GateState{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := 0
	for u := range 50 {
		wg.Go(func() {
			if _, err := g.Grab(context.Background(), sale.GrabRequest{ActivityID: "a", UserID: fmt.Sprint(u), Now: t0}); err == nil {
				mu.Lock()
				acked++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	g.Close()
	if n := len(j.appended()); n != acked {
		t.Fatalf("journal has %d grabs, %d were acknowledged", n, acked)
	}
	if _, err := g.Grab(context.Background(), sale.GrabRequest{ActivityID: "a", UserID: "late", Now: t0}); !errors.Is(err, sale.ErrBusy) {
		t.Fatalf("grab after Close: got %v, want ErrBusy", err)
	}
}
