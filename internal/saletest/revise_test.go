package saletest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"seckill/internal/dbtest"
	"seckill/internal/redistest"
	"seckill/internal/sale"
	"seckill/internal/saletest"

	"seckill/internal/node/nodetest"
)

// TestOperatorChangesReachEveryNode: two nodes on one Redis and one PostgreSQL. Stock added
// through one node sells, exactly that much, through the other, whose sold-out flag and copy of
// the activity are out of date; a sale ended through one is refused ENDED by the other on its
// very next grab, its copy still saying the sale is on.
func TestOperatorChangesReachEveryNode(t *testing.T) {
	ctx := context.Background()
	srv, dsn := redistest.Start(t, redistest.Options{}), dbtest.PostgresDSN(t)
	clock := saletest.NewClock(saletest.T0)
	one, two := nodetest.Distributed(t, clock, srv.URL(), dsn), nodetest.Distributed(t, clock, srv.URL(), dsn)
	a := createItem(t, one.Service, clock, "", 2, time.Minute)
	grab := func(env saletest.Env, user string) error {
		_, err := env.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: user})
		return err
	}
	for _, u := range []string{"u1", "u2"} {
		if err := grab(two, u); err != nil {
			t.Fatal(err)
		}
	}
	if err := grab(two, "u3"); !errors.Is(err, sale.ErrSoldOut) {
		t.Fatalf("a third grab: %v, want sold out", err)
	}

	b, err := one.Operator.AddStock(ctx, a.ID, 3)
	if err != nil || b.Activity.Stock != 5 || b.Activity.Revision != 2 || b.Pending {
		t.Fatalf("AddStock = %+v, %v; want revision 2 of 5 units, in force", b, err)
	}
	// Node two hears of it (its sold-out flag cleared by the announcement) within moments; its
	// copy of the activity still says 2 units of revision 1.
	won := 0
	for deadline := time.Now().Add(10 * time.Second); won == 0; {
		switch err := grab(two, "u3"); {
		case err == nil:
			won++
		case !errors.Is(err, sale.ErrSoldOut):
			t.Fatalf("a grab after the addition: %v", err)
		case time.Now().After(deadline):
			t.Fatal("node two never heard of the units added")
		}
	}
	if err := grab(two, "u4"); err != nil {
		t.Fatalf("the second unit added: %v", err)
	}
	if got, ok := two.Service.Known(a.ID); !ok || got.Revision != 2 || got.Stock != 5 {
		t.Fatalf("node two's copy after its grabs: %+v; want revision 2 of 5 units", got)
	}

	if c, err := one.Operator.EndActivity(ctx, a.ID); err != nil || c.Pending {
		t.Fatalf("EndActivity = %+v, %v; want it in force", c, err)
	}
	if got, _ := two.Service.Known(a.ID); got.Revision != 2 || !clock.Now().Before(got.EndAt) {
		t.Fatalf("node two's copy before its next grab: %+v; want the one from before the end", got)
	}
	if err := grab(two, "u5"); !errors.Is(err, sale.ErrEnded) {
		t.Fatalf("node two's first grab after the end: %v, want ErrEnded", err)
	}
	one.Drain(a.ID)
	c, err := one.Operator.Counts(ctx, a.ID)
	if err != nil || c.Created != 4 {
		t.Fatalf("counts %+v, %v; want the 4 units sold, no more", c, err)
	}
	if rec, err := one.Service.Reconcile(ctx, a.ID); err != nil || !rec.OK || rec.Stock != 5 {
		t.Fatalf("reconcile = %+v, %v; want it at rest on a stock of 5", rec, err)
	}
}

// TestStockAddedWhileTheGateIsAway: the gate refuses the addition; the database has it, the
// gate is given it by the sweeper's ReviseOwed (or by the first grab that finds it behind),
// once however often it is given, and the reconcile agrees.
func TestStockAddedWhileTheGateIsAway(t *testing.T) {
	for name, newEnv := range map[string]saletest.NewEnv{
		"embedded": nodetest.Embedded,
		"redis": func(t testing.TB, c *saletest.Clock) saletest.Env {
			return nodetest.Distributed(t, c, redistest.Start(t, redistest.Options{}).URL(), dbtest.PostgresDSN(t))
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			clock := saletest.NewClock(saletest.T0)
			env := newEnv(t, clock)
			a := createItem(t, env.Service, clock, "", 1, time.Minute)
			env.Faults.FailRevisions(2)
			if c, err := env.Operator.AddStock(ctx, a.ID, 2); err != nil || !c.Pending {
				t.Fatalf("AddStock with the gate away: %+v, %v; want it made, and said pending", c, err)
			}
			if rem, err := env.Service.Remaining(ctx, a.ID); err != nil || rem != 1 {
				t.Fatalf("the gate before it is given the revision: %d, %v", rem, err)
			}
			// The first grab finds the gate behind and gives it the revision; the second try
			// of that fails too (the fault's second count), so it answers busy.
			if _, err := env.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: "u0"}); !errors.Is(err, sale.ErrBusy) {
				t.Fatalf("a grab with the gate behind and still failing: %v, want busy", err)
			}
			for range 2 {
				if _, err := env.Service.ReviseOwed(ctx, 10); err != nil {
					t.Fatalf("ReviseOwed: %v", err)
				}
			}
			if rem, err := env.Service.Remaining(ctx, a.ID); err != nil || rem != 3 {
				t.Fatalf("after the owed revision: %d remaining, %v; want 3", rem, err)
			}
			for i := range 4 {
				_, err := env.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: fmt.Sprint("u", i+1)})
				if i < 3 && err != nil || i == 3 && !errors.Is(err, sale.ErrSoldOut) {
					t.Fatalf("grab %d: %v", i, err)
				}
			}
			env.Drain(a.ID)
			if rec, err := env.Service.Reconcile(ctx, a.ID); err != nil || !rec.OK {
				t.Fatalf("reconcile = %+v, %v", rec, err)
			}
		})
	}
}

// TestEditBeforeTheStartReachesEveryNode: two nodes on one Redis and PostgreSQL, the stock on
// three slots. An edit made through one node before the start (the stock cut from 6 to 4, a new
// price and limit) is what the other sells on from the start, though its copy was read before
// the edit.
func TestEditBeforeTheStartReachesEveryNode(t *testing.T) {
	ctx := context.Background()
	srv, dsn := redistest.Start(t, redistest.Options{}), dbtest.PostgresDSN(t)
	clock := saletest.NewClock(saletest.T0)
	one, two := nodetest.Distributed(t, clock, srv.URL(), dsn), nodetest.Distributed(t, clock, srv.URL(), dsn)
	a, err := one.Service.CreateActivity(ctx, sale.Activity{Name: "sharded", Kind: sale.KindItem, Stock: 6, PriceCents: 100,
		PerUserLimit: 1, StartAt: clock.Now().Add(time.Minute), EndAt: clock.Now().Add(time.Hour), PayWindow: time.Minute,
		Admission: sale.AdmitDirect, StockShards: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := two.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: "early"}); !errors.Is(err, sale.ErrNotStarted) {
		t.Fatalf("a grab before the start: %v", err) // node two has read the activity now
	}
	stock, price, limit := int64(4), int64(250), int64(2)
	if _, err := one.Operator.EditActivity(ctx, a.ID, sale.ActivityEdit{Stock: &stock, PriceCents: &price, PerUserLimit: &limit}); err != nil {
		t.Fatal(err)
	}
	if rem, err := one.Service.Remaining(ctx, a.ID); err != nil || rem != 4 {
		t.Fatalf("the gate after the cut: %d, %v; want 4 over the three shards", rem, err)
	}
	clock.Advance(time.Minute)
	won := 0
	for u := range 4 {
		for range 2 {
			g, err := two.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: fmt.Sprint("u", u)})
			switch {
			case err == nil:
				won++
				if g.AmountCents != 250 {
					t.Errorf("a grab at %d cents, want the new 250", g.AmountCents)
				}
			case !errors.Is(err, sale.ErrSoldOut) && !errors.Is(err, sale.ErrAlreadyBought):
				t.Fatalf("grab: %v", err)
			}
		}
	}
	if won != 4 {
		t.Fatalf("node two sold %d units; want the 4 of the cut stock", won)
	}
	one.Drain(a.ID)
	if rec, err := one.Service.Reconcile(ctx, a.ID); err != nil || !rec.OK || rec.Stock != 4 {
		t.Fatalf("reconcile = %+v, %v", rec, err)
	}
}

// TestEndReachesTheLineOfEveryNode: a queue's sale ended through one node; the other, whose copy
// of the activity still says the sale is on, gives no ticket: its line holds the end itself.
func TestEndReachesTheLineOfEveryNode(t *testing.T) {
	ctx := context.Background()
	srv, dsn := redistest.Start(t, redistest.Options{}), dbtest.PostgresDSN(t)
	clock := saletest.NewClock(saletest.T0)
	one, two := nodetest.Distributed(t, clock, srv.URL(), dsn), nodetest.Distributed(t, clock, srv.URL(), dsn)
	a, err := one.Service.CreateActivity(ctx, sale.Activity{Name: "queue", Kind: sale.KindItem, Stock: 5, PriceCents: 100,
		PerUserLimit: 1, StartAt: clock.Now(), EndAt: clock.Now().Add(time.Hour), PayWindow: time.Minute, Admission: sale.AdmitQueue})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := two.Lines.Join(ctx, a.ID, "early", "", ""); err != nil {
		t.Fatalf("a join before the end: %v", err) // node two has its copy now
	}
	if _, err := one.Operator.EndActivity(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := two.Service.Known(a.ID); !clock.Now().Before(got.EndAt) {
		t.Fatalf("node two's copy: %+v; want the one from before the end", got)
	}
	if _, _, err := two.Lines.Join(ctx, a.ID, "late", "", ""); !errors.Is(err, sale.ErrEnded) {
		t.Fatalf("a join through node two after the end: %v, want ErrEnded", err)
	}
}

// TestOperatorChangesWhileRedisIsStopped: Redis is stopped (SIGSTOP: nothing answers, nothing
// closes) while the operator adds stock and then ends the sale through node one. Both changes
// are made (the database has them; the gate is owed them), and once Redis answers again node
// two's sweeper gives them in order: the units added sell, exactly, and then node two, whose copy
// predates both, refuses every grab ENDED.
func TestOperatorChangesWhileRedisIsStopped(t *testing.T) {
	ctx := context.Background()
	srv, dsn := redistest.Start(t, redistest.Options{AOF: true, Fsync: "always"}), dbtest.MySQLDSN(t)
	clock := saletest.NewClock(saletest.T0)
	one, two := nodetest.Distributed(t, clock, srv.URL(), dsn), nodetest.Distributed(t, clock, srv.URL(), dsn)
	a := createItem(t, one.Service, clock, "", 1, time.Minute)
	if _, err := two.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: "u0"}); err != nil {
		t.Fatal(err) // node two's copy: revision 1, one unit
	}

	srv.Pause(t)
	added, err := one.Operator.AddStock(ctx, a.ID, 2)
	if err != nil || added.Activity.Revision != 2 || !added.Pending {
		t.Fatalf("AddStock with Redis stopped: %+v, %v; want it made, the gate owed it", added, err)
	}
	srv.Resume(t)
	var given int
	for try := 0; given == 0 && try < 20; try++ { // the first calls may meet connections the stop broke
		given, _ = two.Service.ReviseOwed(ctx, 10)
		time.Sleep(50 * time.Millisecond)
	}
	if given != 1 {
		t.Fatalf("node two's sweeper gave %d revisions once Redis was back, want 1", given)
	}
	for i := range 2 {
		if _, err := two.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: fmt.Sprint("u", i+1)}); err != nil {
			t.Fatalf("grab %d of the units added: %v", i+1, err)
		}
	}
	if _, err := two.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: "u3"}); !errors.Is(err, sale.ErrSoldOut) {
		t.Fatalf("a grab past the 3 units: %v, want sold out", err)
	}

	srv.Pause(t)
	if c, err := one.Operator.EndActivity(ctx, a.ID); err != nil || !c.Pending {
		t.Fatalf("EndActivity with Redis stopped: %+v, %v; want it made, the gate owed it", c, err)
	}
	srv.Resume(t)
	given = 0
	for try := 0; given == 0 && try < 20; try++ {
		given, _ = two.Service.ReviseOwed(ctx, 10)
		time.Sleep(50 * time.Millisecond)
	}
	if given != 1 {
		t.Fatalf("node two's sweeper gave %d revisions once Redis was back, want the end", given)
	}
	if _, err := two.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: "late"}); !errors.Is(err, sale.ErrEnded) {
		t.Fatalf("a grab through node two after the end: %v, want ErrEnded", err)
	}
	two.Drain(a.ID)
	if c, err := two.Store.Counts(ctx, a.ID); err != nil || c.Created != 3 {
		t.Fatalf("orders %+v, %v; want the 3 units", c, err)
	}
}
