package redisgate_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"seckill/internal/redisgate"
	"seckill/internal/redistest"
	"seckill/internal/sale"
	"seckill/internal/saletest"
)

func dial(t *testing.T, spec string) redis.UniversalClient {
	t.Helper()
	rdb, err := redisgate.Dial(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func notFound(ctx context.Context, id string) (sale.Activity, error) {
	return sale.Activity{}, sale.ErrNotFound
}

// TestGateRules runs the rules every gate keeps on one Redis server and on a three-master
// cluster, both real, started by redistest.
func TestGateRules(t *testing.T) {
	t.Run("single", func(t *testing.T) {
		rdb := dial(t, redistest.Start(t, redistest.Options{}).URL())
		saletest.GateTests(t, func(t *testing.T) sale.Gate { return redisgate.New(rdb, notFound) })
	})
	t.Run("cluster", func(t *testing.T) {
		rdb := dial(t, redistest.StartCluster(t).Seeds())
		saletest.GateTests(t, func(t *testing.T) sale.Gate { return redisgate.New(rdb, notFound) })
	})
}
