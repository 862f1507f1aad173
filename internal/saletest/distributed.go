package saletest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/redisgate"
	"seckill/internal/sale"
	"seckill/internal/sqlstore"
	"seckill/internal/worker"
)

var nodes atomic.Int64 // numbers the nodes, each a consumer of its own name

// Distributed wires one node of the distributed mode: the Redis gate and stream queue on the
// Redis named by redisSpec (a URL or cluster seeds) and the store on dsn, with a real worker
// consuming in the background. Everything stops when t ends.
func Distributed(t testing.TB, clock *Clock, redisSpec, dsn string) Env {
	ctx := context.Background()
	store, err := sqlstore.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	rdb, err := redisgate.Dial(ctx, redisSpec)
	if err != nil {
		t.Fatal(err)
	}
	gate := redisgate.New(rdb, store.Activity)
	ids := func(ctx context.Context) ([]string, error) {
		acts, err := store.Activities(ctx, time.Time{})
		ids := make([]string, len(acts))
		for i, a := range acts {
			ids[i] = a.ID
		}
		return ids, err
	}
	queue := redisgate.NewQueue(rdb, fmt.Sprint("node-", nodes.Add(1)), ids, 2*time.Millisecond, 30*time.Second)
	svc := sale.NewService(gate, queue, store, clock.Now)
	run, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { (&worker.Worker{Queue: queue, Store: store, Log: quiet, Batch: 16}).Run(run) })
	t.Cleanup(func() {
		stop()
		wg.Wait()
		rdb.Close()
		store.Close()
	})
	return Env{Service: svc, Store: store, Queue: queue, Clock: clock, Drain: drainer(t, queue)}
}
