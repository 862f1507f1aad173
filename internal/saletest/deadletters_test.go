package saletest_test

import (
	"context"
	"testing"
	"time"

	"seckill/internal/sale"
	"seckill/internal/saletest"

	"seckill/internal/node/nodetest"
)

// TestReplayedDeadLetterOpensItsWindowAtTheReplay: two grabs the database refused are replayed
// half an hour later, far past their one-minute payment window. Each order's window opens at the
// replay: the sweeps within the minute after it cancel neither, one buyer pays in its last
// millisecond, and the other's order is cancelled (its unit back on sale) once the minute is over.
func TestReplayedDeadLetterOpensItsWindowAtTheReplay(t *testing.T) {
	ctx := context.Background()
	clock := saletest.NewClock(saletest.T0)
	env := nodetest.Embedded(t, clock)
	a := createItem(t, env.Service, clock, "", 3, time.Minute)
	grabs := map[string]sale.Grab{}
	for _, u := range []string{"payer", "idler"} {
		env.Faults.Unplaceable(u)
		g, err := env.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: u})
		if err != nil {
			t.Fatal(err)
		}
		grabs[u] = g
	}
	env.Drain(a.ID)
	if ds, err := env.Operator.DeadLetters(ctx, a.ID, 10); err != nil || len(ds) != 2 {
		t.Fatalf("dead letters: %+v, %v; want both grabs", ds, err)
	}

	clock.Advance(30 * time.Minute) // the database is fixed, and an operator replays them
	replayed := clock.Now()
	for u, g := range grabs {
		p, err := env.Operator.ReplayDeadLetter(ctx, g.Token)
		if err != nil || p.Order.Status != sale.StatusCreated || !p.Order.ExpiresAt.Equal(replayed.Add(time.Minute)) {
			t.Fatalf("the replay of %s's grab: %+v, %v; want it CREATED, payable until %s", u, p.Order, err, replayed.Add(time.Minute))
		}
	}
	for _, step := range []time.Duration{30 * time.Second, 30*time.Second - time.Millisecond} {
		if n, err := env.Service.SweepExpired(ctx, 10); err != nil || n != 0 {
			t.Fatalf("a sweep within the replayed orders' window cancelled %d, %v; want none", n, err)
		}
		clock.Advance(step)
	}
	if o, err := env.Service.Pay(ctx, "payer", grabs["payer"].Token); err != nil || o.Status != sale.StatusPaid {
		t.Fatalf("the payer pays in the window's last millisecond: %+v, %v", o, err)
	}
	clock.Advance(time.Millisecond)
	if n, err := env.Service.SweepExpired(ctx, 10); err != nil || n != 1 {
		t.Fatalf("the sweep once the window closed cancelled %d, %v; want the idler's order", n, err)
	}
	if o, err := env.Service.Order(ctx, "idler", grabs["idler"].Token); err != nil || o.Status != sale.StatusCancelled {
		t.Fatalf("the idler's order: %+v, %v; want it CANCELLED", o, err)
	}
	if rem, err := env.Service.Remaining(ctx, a.ID); err != nil || rem != 2 {
		t.Fatalf("remaining %d, %v; want 2: the unit never sold and the idler's", rem, err)
	}
}
