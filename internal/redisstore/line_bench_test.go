package redisstore_test

import (
	"context"
	"testing"

	"seckill/internal/redisstore"
	"seckill/internal/redistest"
	"seckill/internal/sale"
	"seckill/internal/saletest"
)

// BenchmarkRedisLineAt1M: the line on a real Redis (no AOF), filled with a million queued users;
// B/user is Redis's used_memory each one costs.
func BenchmarkRedisLineAt1M(b *testing.B) {
	rdb, err := redisstore.Dial(context.Background(), redistest.Start(b, redistest.Options{}).URL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rdb.Close() })
	a := saletest.LineItem("bench-line", 100_000, sale.AdmitQueue)
	a.QueueCap = sale.MaxQueueCap
	saletest.BenchLine(b, redisstore.NewLine(rdb), a, 1_000_000, func() int64 { return redistest.UsedMemory(b, rdb) })
}
