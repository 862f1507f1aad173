package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill/internal/sale"
	"seckill/internal/saletest"
	"seckill/internal/sqlstore"
	"seckill/internal/worker"
)

var t0 = saletest.T0

// twiceQueue hands out every grab twice, in separate batches, and records acknowledgements: the
// worst a real queue does after a crash or a lost ack.
type twiceQueue struct {
	mu      sync.Mutex
	batches [][]sale.Delivery
	acked   int
	buried  []sale.Delivery
}

func (q *twiceQueue) Receive(ctx context.Context, max int) ([]sale.Delivery, error) {
	q.mu.Lock()
	if len(q.batches) > 0 {
		b := q.batches[0]
		q.batches = q.batches[1:]
		q.mu.Unlock()
		return b, nil
	}
	q.mu.Unlock()
	<-ctx.Done()
	return nil, ctx.Err()
}

func (q *twiceQueue) Ack(ctx context.Context, ds []sale.Delivery) error {
	q.mu.Lock()
	q.acked += len(ds)
	q.mu.Unlock()
	return nil
}

func (q *twiceQueue) Bury(ctx context.Context, ds []sale.Delivery, reason string) error {
	q.mu.Lock()
	q.buried = append(q.buried, ds...)
	q.mu.Unlock()
	return nil
}

func (q *twiceQueue) left() (int, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.batches), q.acked
}

func (q *twiceQueue) Pending(context.Context, string) (sale.Grab, error) {
	return sale.Grab{}, sale.ErrNotFound
}
func (q *twiceQueue) Depth(context.Context, sale.Activity) (int64, error)         { return 0, nil }
func (q *twiceQueue) Unacked(context.Context, sale.Activity) ([]sale.Grab, error) { return nil, nil }

// flakyStore fails the first few PlaceOrders calls, as a database that is briefly away.
type flakyStore struct {
	*sqlstore.Store
	mu    sync.Mutex
	fails int
}

func (s *flakyStore) PlaceOrders(ctx context.Context, gs []sale.Grab) ([]sale.Placement, error) {
	s.mu.Lock()
	if s.fails > 0 {
		s.fails--
		s.mu.Unlock()
		return nil, errors.New("database is away")
	}
	s.mu.Unlock()
	return s.Store.PlaceOrders(ctx, gs)
}

// openStore returns a SQLite store holding item activity "a" of the given stock.
func openStore(t *testing.T, stock int64) *sqlstore.Store {
	t.Helper()
	store, err := sqlstore.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	a := sale.Activity{ID: "a", Name: "a", Kind: sale.KindItem, Stock: stock, PriceCents: 1, PerUserLimit: 1,
		StartAt: t0, EndAt: t0.Add(time.Hour), PayWindow: time.Minute, Admission: sale.AdmitDirect, CreatedAt: t0}
	if err := store.CreateActivity(context.Background(), a, nil); err != nil {
		t.Fatal(err)
	}
	return store
}

// deliveries are n first deliveries of grabs of activity "a", one user each.
func deliveries(n int) []sale.Delivery {
	var ds []sale.Delivery
	for i := range n {
		g := sale.Grab{Token: fmt.Sprint("g", i), ActivityID: "a", UserID: fmt.Sprint("u", i), AmountCents: 1, At: t0}
		ds = append(ds, sale.Delivery{ID: fmt.Sprint(i), Grab: g, Attempts: 1})
	}
	return ds
}

func TestEveryGrabDeliveredTwiceMakesOneOrder(t *testing.T) {
	ctx := context.Background()
	const stock = 50
	store := openStore(t, stock)
	ds := deliveries(stock)
	q := &twiceQueue{}
	for lo := 0; lo < stock; lo += 10 {
		q.batches = append(q.batches, ds[lo:lo+10])
	}
	for lo := 0; lo < stock; lo += 7 { // redelivered in other batches
		q.batches = append(q.batches, ds[lo:min(lo+7, stock)])
	}
	var placedMu sync.Mutex
	newOrders := 0
	w := &worker.Worker{Queue: q, Store: &flakyStore{Store: store, fails: 3}, Log: slog.New(slog.DiscardHandler), Batch: 10,
		Placed: func(ps []sale.Placement) {
			placedMu.Lock()
			defer placedMu.Unlock()
			for _, p := range ps {
				if p.New {
					newOrders++
				}
			}
		}}
	run, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { w.Run(run); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left, acked := q.left()
		if left == 0 && acked == 2*stock {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker stuck: %d batches left, %d acks", left, acked)
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	<-done
	c, err := store.Counts(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if c.Orders != stock || c.Created != stock || newOrders != stock {
		t.Fatalf("after %d deliveries of %d grabs: %+v, %d new; want exactly one order per grab", 2*stock, stock, c, newOrders)
	}
}

// TestTooManyDeliveriesGoToTheDeadLetters: a grab delivered more than MaxDeliveries times (its
// workers kept dying on it) is recorded as a dead letter and buried, not placed; the grabs beside
// it are placed as usual.
func TestTooManyDeliveriesGoToTheDeadLetters(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, 5)
	grab := func(u string) sale.Grab {
		return sale.Grab{Token: "g" + u, ActivityID: "a", UserID: u, AmountCents: 1, At: t0}
	}
	q := &twiceQueue{batches: [][]sale.Delivery{{
		{ID: "1", Grab: grab("u1"), Attempts: 1},
		{ID: "2", Grab: grab("u2"), Attempts: 4}, // one past MaxDeliveries
		{ID: "3", Grab: grab("u3"), Attempts: 3},
	}}}
	w := &worker.Worker{Queue: q, Store: store, Log: slog.New(slog.DiscardHandler), MaxDeliveries: 3}
	run, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { w.Run(run); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, acked := q.left(); acked == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("worker did not place the two good grabs")
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	<-done
	if len(q.buried) != 1 || q.buried[0].Grab.UserID != "u2" {
		t.Fatalf("buried %+v, want u2's grab", q.buried)
	}
	c, err := store.Counts(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if c.Orders != 2 || c.DeadLetters != 1 {
		t.Fatalf("counts %+v, want 2 orders and 1 dead letter", c)
	}
	// No order row, but its buyer asking is told it failed, and why.
	if o, err := store.Order(ctx, "gu2"); err != nil || o.Status != sale.StatusFailed || o.UserID != "u2" ||
		!strings.HasPrefix(o.Reason, "dead letter: delivered") {
		t.Fatalf("the dead letter's order: %+v, %v; want FAILED with the dead letter's reason", o, err)
	}
}

// readsQueue reports every Receive on reads.
type readsQueue struct {
	*twiceQueue
	reads chan struct{}
}

func (q readsQueue) Receive(ctx context.Context, max int) ([]sale.Delivery, error) {
	q.reads <- struct{}{}
	return q.twiceQueue.Receive(ctx, max)
}

// TestWorkerLingersOnlyAfterAShortBatch: after a full batch the worker reads again at once (the
// crowd is still there); after a short one it waits Linger, so the next grabs gather into one
// batch; stopping cuts the wait short.
func TestWorkerLingersOnlyAfterAShortBatch(t *testing.T) {
	ds := deliveries(4)
	q := readsQueue{&twiceQueue{batches: [][]sale.Delivery{ds[0:2], ds[2:3], ds[3:4]}}, make(chan struct{}, 8)}
	w := &worker.Worker{Queue: q, Store: openStore(t, 4), Log: slog.New(slog.DiscardHandler), Batch: 2,
		Linger: time.Hour}
	run, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(run); close(done) }()
	for i := range 2 { // the full batch, then at once the short one
		select {
		case <-q.reads:
		case <-time.After(10 * time.Second):
			t.Fatalf("read %d did not come: the worker lingered after a full batch", i+1)
		}
	}
	select {
	case <-q.reads:
		t.Fatal("the worker read again right after a short batch instead of lingering")
	case <-time.After(300 * time.Millisecond):
	}
	stop()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("stopping did not cut the linger short")
	}
	if left, acked := q.left(); left != 1 || acked != 3 {
		t.Fatalf("%d batches left and %d acks, want 1 left and the first 3 grabs acknowledged", left, acked)
	}
}

// TestUnplaceableGrabGoesToTheDeadLetters: a grab the database can never place (its activity
// does not exist: no order may name it) is in a batch with good grabs, on its first delivery
// (the embedded journal never counts more). It is dead-lettered at once and the others placed;
// before, the whole batch failed and was retried until shutdown, and every later grab waited.
func TestUnplaceableGrabGoesToTheDeadLetters(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, 10)
	ds := deliveries(7)
	ds[4].Grab.ActivityID = "nowhere"
	q := &twiceQueue{batches: [][]sale.Delivery{ds, deliveries(9)[7:]}}
	w := &worker.Worker{Queue: q, Store: store, Log: slog.New(slog.DiscardHandler), Batch: 16}
	run, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { w.Run(run); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if left, acked := q.left(); left == 0 && acked == 8 {
			break
		}
		if time.Now().After(deadline) {
			left, acked := q.left()
			t.Fatalf("worker stuck on an unplaceable grab: %d batches left, %d acked", left, acked)
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	<-done
	if len(q.buried) != 1 || q.buried[0].Grab.Token != ds[4].Grab.Token {
		t.Fatalf("buried %+v, want the grab of the activity that does not exist", q.buried)
	}
	c, err := store.Counts(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if c.Orders != 8 || c.Created != 8 || c.Failed != 0 {
		t.Fatalf("counts %+v, want the 8 good grabs placed", c)
	}
	if c, err := store.Counts(ctx, "nowhere"); err != nil || c.DeadLetters != 1 {
		t.Fatalf("dead letters of the unknown activity: %+v, %v", c, err)
	}
}
