package embedded

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"seckill/internal/sale"

	"seckill/internal/saletest"
)

// fakeJournal records appended grabs in memory and fails while fail is set. The SQLite journal
// is tested in sqlstore and end to end; here it would only slow the gate's logic tests.
type fakeJournal struct {
	mu      sync.Mutex
	grabs   []sale.Grab
	batches int
	fail    error
	hold    chan struct{} // when set, a batch waits for it to close before it is written
}

func (j *fakeJournal) AppendGrabs(ctx context.Context, gs []sale.Grab) error {
	j.mu.Lock()
	hold := j.hold
	j.mu.Unlock()
	if hold != nil {
		<-hold
	}
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

var t0 = saletest.T0

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

// named is the activity id as the embedded gate's calls name it: the gate keeps the copy it
// loaded, and finds it by id.
func named(id string) sale.Activity { return sale.Activity{ID: id} }

func load(t *testing.T, g *Gate, a sale.Activity, st sale.GateState) {
	t.Helper()
	if err := g.Load(context.Background(), a, st); err != nil {
		t.Fatalf("Load(%s): %v", a.ID, err)
	}
}

func TestIdempotentRetryReturnsTheFirstGrab(t *testing.T) {
	g, j := newGate(t)
	load(t, g, item("a", 10, 3), sale.GateState{})
	req := sale.GrabRequest{ActivityID: "a", UserID: "u1", IdempotencyKey: "k", Now: t0}
	first, err := g.Grab(context.Background(), named(req.ActivityID), req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := g.Grab(context.Background(), named(req.ActivityID), req)
	if err != nil || again != first {
		t.Fatalf("retry = %+v, %v; want the first grab %+v", again, err, first)
	}
	if rem, _ := g.Remaining(context.Background(), named("a")); rem != 9 {
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
	if _, err := g.Grab(context.Background(), named(req.ActivityID), req); !errors.Is(err, sale.ErrBusy) {
		t.Fatalf("grab with a failing journal: got %v, want ErrBusy", err)
	}
	if rem, _ := g.Remaining(context.Background(), named("a")); rem != 1 {
		t.Fatalf("remaining = %d after a refused grab, want 1", rem)
	}
	j.setFail(nil)
	// The same key is tried afresh: the refused grab gave no answer to repeat.
	got, err := g.Grab(context.Background(), named(req.ActivityID), req)
	if err != nil {
		t.Fatalf("retry after the journal recovered: %v", err)
	}
	if n := len(j.appended()); n != 1 || j.appended()[0].Token != got.Token {
		t.Fatalf("journal = %+v, want just %s", j.appended(), got.Token)
	}
}

// TestGrabOutlastingItsCallerIsSettled: a grab whose commit takes longer than its caller's
// context answers busy when the context ends, and the commit's outcome then settles it without
// the caller: a retry with the same idempotency key waits for it and gets it, and a refused
// commit gives the unit back.
func TestGrabOutlastingItsCallerIsSettled(t *testing.T) {
	for _, refused := range []bool{false, true} {
		t.Run(fmt.Sprintf("refused=%v", refused), func(t *testing.T) {
			g, j := newGate(t)
			load(t, g, item("a", 5, 1), sale.GateState{})
			hold := make(chan struct{})
			j.mu.Lock()
			j.hold = hold
			j.mu.Unlock()
			req := sale.GrabRequest{ActivityID: "a", UserID: "u1", IdempotencyKey: "k", Now: t0}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			if _, err := g.Grab(ctx, named("a"), req); !errors.Is(err, sale.ErrBusy) || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				t.Fatalf("a grab whose commit is held past its deadline: %v (context %v), want busy at the deadline", err, ctx.Err())
			}
			if rem, _ := g.Remaining(context.Background(), named("a")); rem != 4 {
				t.Fatalf("remaining = %d while the commit is held, want 4: the unit is the grab's until it is settled", rem)
			}
			type result struct {
				grab sale.Grab
				err  error
			}
			retried := make(chan result, 1)
			go func() {
				gr, err := g.Grab(context.Background(), named("a"), req)
				retried <- result{gr, err}
			}()
			select {
			case r := <-retried:
				t.Fatalf("the retry answered %+v before the first grab's commit was settled", r)
			case <-time.After(50 * time.Millisecond):
			}
			if refused {
				j.setFail(errors.New("disk full"))
			}
			close(hold)
			r := <-retried
			rem, _ := g.Remaining(context.Background(), named("a"))
			switch {
			case refused && (!errors.Is(r.err, sale.ErrBusy) || rem != 5):
				t.Fatalf("the retry of a refused commit: %+v, remaining %d; want busy and the unit back (5)", r, rem)
			case !refused && (r.err != nil || r.grab.UserID != "u1" || rem != 4 || len(j.appended()) != 1 || j.appended()[0].Token != r.grab.Token):
				t.Fatalf("the retry of a commit that went through: %+v, remaining %d, journal %+v; want the first grab, 4 left", r, rem, j.appended())
			}
		})
	}
}

// TestJournalHoldsExactlyTheWins: under a crowd (the rules themselves are saletest.GateTests'),
// the journal holds exactly the grabs that were acknowledged, written in far fewer transactions
// than grabs.
func TestJournalHoldsExactlyTheWins(t *testing.T) {
	const users, stock = 2000, 500
	g, j := newGate(t)
	load(t, g, item("a", stock, 1), sale.GateState{})
	var mu sync.Mutex
	wins := map[string]string{} // token -> user
	var wg sync.WaitGroup
	for u := range users {
		wg.Go(func() {
			got, err := g.Grab(context.Background(), named("a"), sale.GrabRequest{ActivityID: "a", UserID: fmt.Sprint("u", u), Now: t0})
			if err == nil {
				mu.Lock()
				wins[got.Token] = got.UserID
				mu.Unlock()
			} else if !errors.Is(err, sale.ErrSoldOut) {
				t.Errorf("grab: %v", err)
			}
		})
	}
	wg.Wait()
	journal := j.appended()
	if len(wins) != stock || len(journal) != stock {
		t.Fatalf("%d wins, %d grabs in the journal; want %d of each", len(wins), len(journal), stock)
	}
	for _, gr := range journal {
		if wins[gr.Token] != gr.UserID {
			t.Fatalf("journal grab %s of %s was not acknowledged to that user", gr.Token, gr.UserID)
		}
	}
	if j.batches >= stock {
		t.Errorf("%d grabs took %d journal transactions: no group commit", stock, j.batches)
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
			if _, err := g.Grab(context.Background(), named("a"), sale.GrabRequest{ActivityID: "a", UserID: fmt.Sprint(u), Now: t0}); err == nil {
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
	if _, err := g.Grab(context.Background(), named("a"), sale.GrabRequest{ActivityID: "a", UserID: "late", Now: t0}); !errors.Is(err, sale.ErrBusy) {
		t.Fatalf("grab after Close: got %v, want ErrBusy", err)
	}
}
