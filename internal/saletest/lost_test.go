package saletest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"seckill/internal/dbtest"
	"seckill/internal/redisstore"
	"seckill/internal/redistest"
	"seckill/internal/sale"
	"seckill/internal/saletest"

	"seckill/internal/node/nodetest"
)

// The operator's changes and restocks when Redis loses what it held: a master killed and
// restarted without persistence comes back empty, as a cache does. Neither a revision nor a
// restock may be counted as given to a gate that did not hold the activity.

// retryBusy is how long a test's client keeps retrying a BUSY answer: the connections a restart
// broke fail the first calls, and enough of them open the node's breaker for its open time.
const retryBusy = 15 * time.Second

// grab grabs for user through env, retrying a BUSY answer as a client would, for up to retryBusy.
func grab(env saletest.Env, id, user string) (sale.Grab, error) {
	for deadline := time.Now().Add(retryBusy); ; time.Sleep(100 * time.Millisecond) {
		g, err := env.Service.Grab(context.Background(), sale.GrabRequest{ActivityID: id, UserID: user})
		if !errors.Is(err, sale.ErrBusy) || time.Now().After(deadline) {
			return g, err
		}
	}
}

// grabThrough grabs until the sale answers sold out, as distinct users, each retrying a busy
// answer as a client would (a connection the restart broke); it returns the wins.
func grabThrough(t *testing.T, env saletest.Env, id, prefix string, max int) int {
	t.Helper()
	won := 0
	for u := range max {
		user := fmt.Sprint(prefix, u)
		_, err := grab(env, id, user)
		switch {
		case errors.Is(err, sale.ErrSoldOut):
			return won
		case err != nil:
			t.Fatalf("grab by %s after %d wins: %v", user, won, err)
		}
		won++
	}
	t.Fatalf("%d grabs and the sale is not sold out", max)
	return won
}

// TestRevisionWhileAShardIsLost: an item's stock on three slots of a three-master cluster; the
// master of a shard other than the first is killed and comes back empty; the operator adds 3
// units meanwhile. The addition reaches the shards that are there (the first takes the units),
// stays owed for the one that is not, and is given to it when a grab rebuilds it: through the
// other node, whose copy is the new one, every unit the loss spared and every unit added sells,
// and none is refused as stale.
func TestRevisionWhileAShardIsLost(t *testing.T) {
	ctx := context.Background()
	cluster := redistest.StartCluster(t)
	dsn := dbtest.PostgresDSN(t)
	clock := saletest.NewClock(saletest.T0)
	one, two := nodetest.Distributed(t, clock, cluster.Seeds(), dsn), nodetest.Distributed(t, clock, cluster.Seeds(), dsn)
	rdb, err := redisstore.Dial(ctx, cluster.Seeds())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	master := func(a sale.Activity, i int64) int {
		return cluster.MasterOfKey(t, redisstore.StreamKey(redisstore.ShardID(a.ID, i)))
	}
	var a sale.Activity
	lost := -1
	for try := 0; lost < 0; try++ {
		if try == 20 {
			t.Fatal("20 activities, each with its three shards on the same master")
		}
		a, err = one.Service.CreateActivity(ctx, sale.Activity{Name: "sharded", Kind: sale.KindItem, Stock: 9, PerUserLimit: 1,
			StartAt: clock.Now(), EndAt: clock.Now().Add(time.Hour), PayWindow: time.Hour, Admission: sale.AdmitDirect, StockShards: 3})
		if err != nil {
			t.Fatal(err)
		}
		for i := int64(1); i < 3; i++ {
			if m := master(a, i); m != master(a, 0) {
				lost = m
			}
		}
	}
	spared := int64(0)
	for i := range int64(3) {
		if master(a, i) != lost {
			n, err := rdb.Get(ctx, "{act:"+redisstore.ShardID(a.ID, i)+"}:stock").Int64()
			if err != nil {
				t.Fatal(err)
			}
			spared += n
		}
	}

	cluster.Node(lost).Kill()
	cluster.Node(lost).Restart(t)
	cluster.WaitOK(t)
	b, err := one.Operator.AddStock(ctx, a.ID, 3)
	if err != nil || b.Activity.Revision != 2 {
		t.Fatalf("AddStock with a shard lost = %+v, %v", b, err)
	}
	if won := grabThrough(t, two, a.ID, "after-", 50); int64(won) != spared+3 {
		t.Fatalf("%d units sold after the loss; want the %d the loss spared and the 3 added", won, spared)
	}
	if owed, err := one.Store.Unrevised(ctx, a.ID, 10); err != nil || len(owed) != 0 {
		t.Fatalf("revisions still owed once the shard was rebuilt: %+v, %v", owed, err)
	}
}

// TestRestockMeetsARebuild: Redis restarts empty. Node one rebuilds the activity for a grab; after
// it read the database (the order still held) and before it stores that, node two cancels the
// order and gives its unit back to a gate that does not hold the activity. The restock waits
// for a gate that does (node two rebuilds it, the order cancelled), and node one, finding it
// loaded, stores nothing over it: the unit sells again.
func TestRestockMeetsARebuild(t *testing.T) {
	ctx := context.Background()
	srv, dsn := redistest.Start(t, redistest.Options{}), dbtest.MySQLDSN(t)
	clock := saletest.NewClock(saletest.T0)
	one, two := nodetest.Distributed(t, clock, srv.URL(), dsn), nodetest.Distributed(t, clock, srv.URL(), dsn)
	a := createItem(t, one.Service, clock, "", 1, time.Hour)
	g, err := one.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: "first"})
	if err != nil {
		t.Fatal(err)
	}
	one.Drain(a.ID)

	srv.Kill()
	srv.Restart(t)
	cancelled := make(chan error, 1)
	one.Faults.BeforeWarm(func() {
		_, err := two.Service.Cancel(ctx, "first", g.Token)
		cancelled <- err
	})
	_, second := grab(one, a.ID, "second")
	select {
	case err := <-cancelled:
		if err != nil {
			t.Fatalf("the cancel during the rebuild: %v", err)
		}
	default:
		t.Fatalf("the grab (%v) never had the activity rebuilt", second)
	}
	if second != nil {
		t.Fatalf("a grab after the cancel, its unit given back during the rebuild: %v; want it won", second)
	}
	one.Drain(a.ID)
	if c, err := one.Store.Counts(ctx, a.ID); err != nil || c.Created != 1 || c.Cancelled != 1 {
		t.Fatalf("orders %+v, %v; want the cancelled one and the second buyer's", c, err)
	}
	if owed, err := one.Store.Unreleased(ctx, 10); err != nil || len(owed) != 0 {
		t.Fatalf("restocks owed after: %+v, %v", owed, err)
	}
	if rec, err := one.Service.Check(ctx, a.ID); err != nil || !rec.OK {
		t.Fatalf("the gate against the database: %+v, %v", rec, err)
	}
}
