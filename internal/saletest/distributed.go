package saletest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/redisgate"
	"seckill/internal/sale"
	"seckill/internal/sqlstore"
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
	ids := func(ctx context.Context) ([]sale.Activity, error) { return store.Activities(ctx, time.Time{}) }
	// Every random sale is a new activity: listed every 20 ms, its first drain need not wait a second.
	queue := redisgate.NewQueue(rdb, fmt.Sprint("node-", nodes.Add(1)), ids, 2*time.Millisecond, 30*time.Second).
		WithListEvery(20 * time.Millisecond)
	env := start(t, clock, gate, queue, store, redisgate.NewRanking(rdb, ExactMax), rdb.Close, store.Close)
	env.Service.WithRestocks(redisgate.NewRestocks(rdb), RestockFlagTTL).WithLine(redisgate.NewLine(rdb))
	env.Answers = NewAnswers(redisgate.NewChallenges(rdb))
	env.Service.WithChallenges(env.Answers)
	listen, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { env.Service.ListenRestocks(listen); close(done) }()
	t.Cleanup(func() { stop(); <-done }) // before rdb closes: cleanups run last-registered first
	return env
}

// RestockFlagTTL is how long a distributed test node trusts its sold-out flags: long enough that
// a test sees a flag cleared by an announcement, not by its expiry.
const RestockFlagTTL = 10 * time.Second
