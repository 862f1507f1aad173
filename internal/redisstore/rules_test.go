package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/redisstore"
	"seckill/internal/redistest"
	"seckill/internal/sale"
	"seckill/internal/saletest"
)

func dial(t *testing.T, spec string) redis.UniversalClient {
	t.Helper()
	rdb, err := redisstore.Dial(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// TestGateRules runs the rules every gate keeps on one Redis server and on a three-master
// cluster, both real, started by redistest.
func TestGateRules(t *testing.T) {
	t.Run("single", func(t *testing.T) {
		rdb := dial(t, redistest.Start(t, redistest.Options{}).URL())
		saletest.GateTests(t, func(t *testing.T) sale.Gate { return redisstore.New(rdb) })
	})
	t.Run("cluster", func(t *testing.T) {
		rdb := dial(t, redistest.StartCluster(t).Seeds())
		saletest.GateTests(t, func(t *testing.T) sale.Gate { return redisstore.New(rdb) })
		// The same rules with every item's stock split over three slots (as far as it goes).
		t.Run("sharded", func(t *testing.T) {
			saletest.GateTests(t, func(t *testing.T) sale.Gate { return sharded{redisstore.New(rdb)} })
		})
	})
}

// sharded is a gate that splits every item's stock into three shards (fewer for a smaller
// stock): each call names its activity, and sharded names it split.
type sharded struct{ *redisstore.Gate }

func (g sharded) Grab(ctx context.Context, a sale.Activity, r sale.GrabRequest) (sale.Grab, error) {
	return g.Gate.Grab(ctx, shard(a), r)
}

func (g sharded) Release(ctx context.Context, a sale.Activity, gr sale.Grab) error {
	return g.Gate.Release(ctx, shard(a), gr)
}

func (g sharded) Remaining(ctx context.Context, a sale.Activity) (int64, error) {
	return g.Gate.Remaining(ctx, shard(a))
}

func (g sharded) Drop(ctx context.Context, a sale.Activity) error { return g.Gate.Drop(ctx, shard(a)) }

func (g sharded) Repair(ctx context.Context, a sale.Activity, read func(ctx context.Context, remaining int64) (sale.GateState, bool, error)) (bool, error) {
	return g.Gate.Repair(ctx, shard(a), read)
}

func (g sharded) IssuePass(ctx context.Context, a sale.Activity, userID, token string, now, expires time.Time) error {
	return g.Gate.IssuePass(ctx, shard(a), userID, token, now, expires)
}

func (g sharded) SpendPass(ctx context.Context, a sale.Activity, userID, token string, now time.Time) error {
	return g.Gate.SpendPass(ctx, shard(a), userID, token, now)
}

func (g sharded) HoldWaves(ctx context.Context, a sale.Activity, waves map[string]int64) error {
	return g.Gate.HoldWaves(ctx, shard(a), waves)
}

func (g sharded) SealWaves(ctx context.Context, a sale.Activity, n int64) error {
	return g.Gate.SealWaves(ctx, shard(a), n)
}

func (g sharded) WavesSealed(ctx context.Context, a sale.Activity) (bool, error) {
	return g.Gate.WavesSealed(ctx, shard(a))
}

func (g sharded) Load(ctx context.Context, a sale.Activity, st sale.GateState) error {
	return g.Gate.Load(ctx, shard(a), st)
}

func (g sharded) Warm(ctx context.Context, a sale.Activity, st sale.GateState) (bool, error) {
	return g.Gate.Warm(ctx, shard(a), st)
}

func shard(a sale.Activity) sale.Activity {
	if a.Kind == sale.KindItem {
		a.StockShards = min(3, a.Stock)
	}
	return a
}

// TestLineRules runs the rules every line keeps (saletest.LineTests) on one Redis server and on
// a three-master cluster; reopening is a new client on the same server, as a restarted node is.
func TestLineRules(t *testing.T) {
	for _, c := range []struct {
		name string
		spec func(t *testing.T) string
	}{
		{"single", func(t *testing.T) string { return redistest.Start(t, redistest.Options{}).URL() }},
		{"cluster", func(t *testing.T) string { return redistest.StartCluster(t).Seeds() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := c.spec(t)
			saletest.LineTests(t, func(t *testing.T) (sale.Line, func() sale.Line) {
				return redisstore.NewLine(dial(t, spec)), func() sale.Line { return redisstore.NewLine(dial(t, spec)) }
			})
		})
	}
}

// TestLeaseRules runs the rules every lease keeps (saletest.LeaseTests) on a real Redis server.
func TestLeaseRules(t *testing.T) {
	rdb := dial(t, redistest.Start(t, redistest.Options{}).URL())
	saletest.LeaseTests(t, func(*testing.T) sale.Lease { return redisstore.NewLease(rdb) })
}

func (g sharded) Revise(ctx context.Context, a sale.Activity, add int64) error {
	return g.Gate.Revise(ctx, shard(a), add)
}
