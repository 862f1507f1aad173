package worker_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"seckill/internal/embedded"
	"seckill/internal/sale"
	"seckill/internal/saletest"
	"seckill/internal/worker"

	"seckill/internal/node/nodetest"
)

// TestScheduledReconcile: of two nodes sharing the lease, one reconciles a round and the other
// skips it; by default a drift (a dead-lettered grab's unit, held in the gate and by no order)
// is reported and left, and with Repair it is repaired, after which the round finds none.
func TestScheduledReconcile(t *testing.T) {
	ctx := context.Background()
	clock := saletest.NewClock(saletest.T0)
	env := nodetest.Embedded(t, clock)
	a, err := env.Service.CreateActivity(ctx, sale.Activity{Name: "drift", Kind: sale.KindItem, Stock: 5, PriceCents: 100,
		PerUserLimit: 1, StartAt: clock.Now(), EndAt: clock.Now().Add(time.Hour), PayWindow: time.Minute, Admission: sale.AdmitDirect})
	if err != nil {
		t.Fatal(err)
	}
	env.Faults.Unplaceable("poison")
	for _, u := range []string{"u1", "poison"} {
		if _, err := env.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: u}); err != nil {
			t.Fatal(err)
		}
	}
	env.Drain(a.ID)

	lease := embedded.NewLease(time.Now)
	type check struct {
		id  string
		rec sale.Reconciliation
		err error
	}
	node := func(name string, repair bool, seen *[]check) *worker.Reconciler {
		return &worker.Reconciler{Service: env.Service, Lease: lease, Holder: name, Every: time.Hour, Repair: repair,
			Log: slog.New(slog.DiscardHandler), Checked: func(id string, rec sale.Reconciliation, err error) {
				*seen = append(*seen, check{id, rec, err})
			}}
	}
	var first, second []check
	if !node("a", false, &first).Round(ctx) {
		t.Fatal("the first node did not get the free lease")
	}
	if node("b", false, &second).Round(ctx) || len(second) != 0 {
		t.Fatalf("the second node reconciled (%+v) while the first held the lease", second)
	}
	if len(first) != 1 || first[0].id != a.ID || first[0].err != nil || first[0].rec.Outcome != sale.ReconcileDrift ||
		first[0].rec.Drift != -1 || first[0].rec.Repaired {
		t.Fatalf("report-only round: %+v; want %s's drift of -1 reported, not repaired", first, a.ID)
	}
	if n, _ := env.Service.Remaining(ctx, a.ID); n != 3 {
		t.Fatalf("remaining %d after a report-only round, want 3: the gate left as it was", n)
	}

	var repaired []check
	if !node("a", true, &repaired).Round(ctx) {
		t.Fatal("the holder lost its lease")
	}
	if len(repaired) != 1 || repaired[0].rec.Outcome != sale.ReconcileRepaired || repaired[0].rec.Drift != -1 {
		t.Fatalf("repairing round: %+v; want the drift of -1 repaired", repaired)
	}
	if n, _ := env.Service.Remaining(ctx, a.ID); n != 4 {
		t.Fatalf("remaining %d after the repair, want 4: the dead letter's unit back", n)
	}
	var after []check
	node("a", false, &after).Round(ctx)
	if len(after) != 1 || after[0].rec.Outcome != sale.ReconcileOK || after[0].rec.Drift != 0 {
		t.Fatalf("round after the repair: %+v; want ok", after)
	}
}

// TestEventPurgerOneNodeAtATime: of two nodes sharing the lease, one purges the order events
// every sink took more than Keep ago and the other skips its round; an event the sink has not
// taken stays.
func TestEventPurgerOneNodeAtATime(t *testing.T) {
	ctx := context.Background()
	clock := saletest.NewClock(saletest.T0)
	env := nodetest.Embedded(t, clock)
	a, err := env.Service.CreateActivity(ctx, sale.Activity{Name: "events", Kind: sale.KindItem, Stock: 5, PriceCents: 100,
		PerUserLimit: 1, StartAt: clock.Now(), EndAt: clock.Now().Add(time.Hour), PayWindow: time.Minute, Admission: sale.AdmitDirect})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"u1", "u2", "u3"} {
		if _, err := env.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: u}); err != nil {
			t.Fatal(err)
		}
	}
	env.Drain(a.ID)
	ds, err := env.Store.Deliverable(ctx, saletest.Sink, clock.Now(), 10)
	if err != nil || len(ds) != 3 {
		t.Fatalf("due: %v, %v; want the 3 creations", ds, err)
	}
	for _, d := range ds[:2] { // the third stays pending
		if err := env.Store.Delivered(ctx, saletest.Sink, d.ID, clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(2 * time.Hour)
	lease := embedded.NewLease(time.Now)
	var purged []int
	node := func(name string) *worker.EventPurger {
		return &worker.EventPurger{Outbox: env.Outbox, Lease: lease, Holder: name, Every: time.Minute, Keep: time.Hour,
			Log: slog.New(slog.DiscardHandler), Purged: func(n int) { purged = append(purged, n) }}
	}
	if n := node("a").Round(ctx); n != 2 {
		t.Fatalf("the lease's holder purged %d, want the 2 events delivered an hour ago", n)
	}
	if n := node("b").Round(ctx); n != 0 {
		t.Fatalf("the other node purged %d while the first held the lease", n)
	}
	if n := node("a").Round(ctx); n != 0 || len(purged) != 1 {
		t.Fatalf("a second round purged %d (rounds told: %v); want nothing left to purge", n, purged)
	}
	left, err := env.Outbox.Deliveries(ctx, sale.DeliveryFilter{Limit: 10})
	if err != nil || len(left) != 1 || left[0].ID != ds[2].ID || left[0].State != sale.DeliveryPending {
		t.Fatalf("left: %+v, %v; want %s, pending", left, err, ds[2].ID)
	}
}
