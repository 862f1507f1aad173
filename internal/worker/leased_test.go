package worker_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"seckill/internal/memory"
	"seckill/internal/sale"
	"seckill/internal/saletest"
	"seckill/internal/worker"
)

// TestScheduledReconcile: of two nodes sharing the lease, one reconciles a round and the other
// skips it; by default a drift (a dead-lettered grab's unit, held in the gate and by no order)
// is reported and left, and with Repair it is repaired, after which the round finds none.
func TestScheduledReconcile(t *testing.T) {
	ctx := context.Background()
	clock := saletest.NewClock(saletest.T0)
	env := saletest.Embedded(t, clock)
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

	lease := memory.NewLease(time.Now)
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
