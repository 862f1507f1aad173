package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"seckill/internal/sale"
)

// fakePlacer places every grab as a CREATED order, or fails every batch while fail is set, or
// waits for its context to end while hang is set (a database writer busy elsewhere).
type fakePlacer struct {
	mu     sync.Mutex
	orders map[string]sale.Order
	fail   error
	hang   bool
	delay  time.Duration // each placement takes this long, then commits
}

func (p *fakePlacer) PlaceOrders(ctx context.Context, gs []sale.Grab) ([]sale.Placement, error) {
	if p.delay > 0 {
		time.Sleep(p.delay)
	}
	p.mu.Lock()
	if p.hang {
		p.mu.Unlock()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	defer p.mu.Unlock()
	if p.fail != nil {
		return nil, p.fail
	}
	out := make([]sale.Placement, len(gs))
	for i, g := range gs {
		o, ok := p.orders[g.Token]
		if !ok {
			o = sale.Order{ID: int64(len(p.orders) + 1), Token: g.Token, ActivityID: g.ActivityID, UserID: g.UserID, Status: sale.StatusCreated}
			p.orders[g.Token] = o
		}
		out[i] = sale.Placement{Order: o, New: !ok}
	}
	return out, nil
}

func (p *fakePlacer) DeadLetter(context.Context, sale.Grab, int, string, time.Time) error { return nil }

func (p *fakePlacer) setFail(err error) { p.mu.Lock(); p.fail = err; p.mu.Unlock() }

func (p *fakePlacer) placed() int { p.mu.Lock(); defer p.mu.Unlock(); return len(p.orders) }

// TestPlacingPlacesAtCommit: the gate's grabs become orders in the commit that acknowledges
// them, and whoever listens is told; when the database refuses the batch, it goes to the journal
// and the queue is woken; when both refuse, the grab is refused and its unit given back.
func TestPlacingPlacesAtCommit(t *testing.T) {
	store, journal := &fakePlacer{orders: map[string]sale.Order{}}, &fakeJournal{}
	var wakes int
	var mu sync.Mutex
	var told []sale.Placement
	p := NewPlacing(store, journal, func() { mu.Lock(); wakes++; mu.Unlock() }, slog.New(slog.DiscardHandler))
	p.OnPlaced(func(ps []sale.Placement) { mu.Lock(); told = append(told, ps...); mu.Unlock() })
	g := NewGate(p, 64, nil)
	t.Cleanup(func() { g.Close() })
	load(t, g, item("a", 3, 1), sale.GateState{})
	grab := func(user string) (sale.Grab, error) {
		return g.Grab(context.Background(), named("a"), sale.GrabRequest{ActivityID: "a", UserID: user, Now: t0})
	}

	first, err := grab("u1")
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if store.placed() != 1 || len(journal.appended()) != 0 || wakes != 0 || len(told) != 1 || told[0].Order.Token != first.Token || !told[0].New {
		t.Fatalf("placed %d, journaled %d, woke %d, told %+v: want the one order placed and told, nothing journaled",
			store.placed(), len(journal.appended()), wakes, told)
	}
	mu.Unlock()

	store.setFail(fmt.Errorf("%w: no such activity", sale.ErrUnplaceable))
	second, err := grab("u2")
	if err != nil {
		t.Fatalf("a grab the database refuses is journaled, not refused: %v", err)
	}
	mu.Lock()
	if j := journal.appended(); len(j) != 1 || j[0].Token != second.Token || wakes != 1 || len(told) != 1 {
		t.Fatalf("journaled %v, woke %d, told %d: want the second grab journaled and the queue woken", j, wakes, len(told))
	}
	mu.Unlock()

	journal.setFail(errors.New("disk full"))
	if _, err := grab("u3"); !errors.Is(err, sale.ErrBusy) {
		t.Fatalf("neither the database nor the journal takes it: %v, want ErrBusy", err)
	}
	if n, _ := g.Remaining(context.Background(), named("a")); n != 1 {
		t.Fatalf("remaining %d after the refused grab, want its unit back (1)", n)
	}
}

// TestPlacingDoesNotWaitBehindTheDatabase: a placement the database does not finish within
// PlaceWithin (its writer busy with another transaction) is journaled instead, and the grab
// answered then, not when the database is free again.
func TestPlacingDoesNotWaitBehindTheDatabase(t *testing.T) {
	store, journal := &fakePlacer{orders: map[string]sale.Order{}, hang: true}, &fakeJournal{}
	p := NewPlacing(store, journal, nil, slog.New(slog.DiscardHandler))
	p.PlaceWithin, p.PlaceAtMost = 50*time.Millisecond, 100*time.Millisecond
	g := NewGate(p, 64, nil)
	t.Cleanup(func() { g.Close() })
	load(t, g, item("a", 3, 1), sale.GateState{})
	done := make(chan error, 1)
	go func() {
		_, err := g.Grab(context.Background(), named("a"), sale.GrabRequest{ActivityID: "a", UserID: "u1", Now: t0})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("a grab while the database hangs: %v, want it journaled", err)
		}
	case <-time.After(10 * time.Second): // a liveness bound, far above PlaceWithin
		t.Fatal("the grab waited behind the hung database")
	}
	if j := journal.appended(); len(j) != 1 || store.placed() != 0 {
		t.Fatalf("journaled %d, placed %d: want the grab in the journal", len(j), store.placed())
	}
}

// TestASlowPlacementTellsOfWhatItCreated: a placement the gate stopped waiting for goes on; its
// batch is journaled and the grab answered at once, and once the placement commits it tells of
// the orders it created, as new. The worker's placing of the journaled batch then finds them
// placed: each order is told of as new once, by whoever created it.
func TestASlowPlacementTellsOfWhatItCreated(t *testing.T) {
	store, journal := &fakePlacer{orders: map[string]sale.Order{}, delay: 300 * time.Millisecond}, &fakeJournal{}
	var mu sync.Mutex
	var told []sale.Placement
	p := NewPlacing(store, journal, nil, slog.New(slog.DiscardHandler))
	p.PlaceWithin = 20 * time.Millisecond
	p.OnPlaced(func(ps []sale.Placement) { mu.Lock(); told = append(told, ps...); mu.Unlock() })
	g := NewGate(p, 64, nil)
	t.Cleanup(func() { g.Close() })
	load(t, g, item("a", 3, 1), sale.GateState{})
	gr, err := g.Grab(context.Background(), named("a"), sale.GrabRequest{ActivityID: "a", UserID: "u1", Now: t0})
	if err != nil {
		t.Fatalf("a grab while the placement is slow: %v, want it journaled", err)
	}
	// The gate's next batch reuses the first one's slice while the first placement still runs.
	second, err := g.Grab(context.Background(), named("a"), sale.GrabRequest{ActivityID: "a", UserID: "u2", Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if j := journal.appended(); len(j) != 2 || j[0].Token != gr.Token || j[1].Token != second.Token {
		t.Fatalf("journaled %v, want the two grabs", j)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) { // a liveness bound
		mu.Lock()
		n := len(told)
		mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slow placement never told of the order it created")
		}
	}
	store.delay = 0
	again, err := store.PlaceOrders(context.Background(), []sale.Grab{gr}) // the worker, from the journal
	mu.Lock()
	defer mu.Unlock()
	tokens := map[string]bool{}
	for _, pl := range told {
		tokens[pl.Order.Token] = pl.New
	}
	if len(told) != 2 || !tokens[gr.Token] || !tokens[second.Token] || err != nil || again[0].New {
		t.Fatalf("told %+v; the worker's placing %+v, %v: want each order told of once, as new, by the placement that created it", told, again, err)
	}
}
