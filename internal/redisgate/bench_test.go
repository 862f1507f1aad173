package redisgate

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"seckill/internal/redistest"
	"seckill/internal/sale"
)

// benchGate is a gate on a fresh real Redis (no AOF) with one activity of the given stock.
func benchGate(b *testing.B, stock int64) *Gate {
	rdb, err := Dial(context.Background(), redistest.Start(b, redistest.Options{}).URL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rdb.Close() })
	g := New(rdb, notFound)
	if err := g.Load(context.Background(), item("a", stock, 1), sale.GateState{}); err != nil {
		b.Fatal(err)
	}
	return g
}

// BenchmarkRedisGrabParallel: every grab wins (a new user each), 16 goroutines per CPU, each
// grab one EVALSHA of grab.lua.
func BenchmarkRedisGrabParallel(b *testing.B) {
	g := benchGate(b, sale.MaxStock)
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.Grab(context.Background(), sale.GrabRequest{ActivityID: "a", UserID: strconv.FormatInt(n.Add(1), 10), Now: t0}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRedisSoldOutParallel: the script's answer after the last unit.
func BenchmarkRedisSoldOutParallel(b *testing.B) {
	g := benchGate(b, 1)
	if _, err := g.Grab(context.Background(), sale.GrabRequest{ActivityID: "a", UserID: "first", Now: t0}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.Grab(context.Background(), sale.GrabRequest{ActivityID: "a", UserID: "late", Now: t0}); err != sale.ErrSoldOut {
				b.Fatal(err)
			}
		}
	})
}
