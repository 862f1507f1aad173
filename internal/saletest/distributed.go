package saletest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
	store.EmitTo(Sink)
	rdb, err := redisgate.Dial(ctx, redisSpec)
	if err != nil {
		t.Fatal(err)
	}
	gate := redisgate.New(rdb)
	ids := func(ctx context.Context) ([]sale.Activity, error) { return store.Activities(ctx, time.Time{}) }
	// Every random sale is a new activity: listed every 20 ms, its first drain need not wait a second.
	queue := redisgate.NewQueue(rdb, fmt.Sprint("node-", nodes.Add(1)), ids, 2*time.Millisecond, 30*time.Second).
		WithListEvery(20 * time.Millisecond)
	answers := NewAnswers(redisgate.NewChallenges(rdb))
	d := sale.DepsOf(gate, queue, store)
	d.Ranking, d.Line, d.Challenges = redisgate.NewRanking(rdb, ExactMax), redisgate.NewLine(rdb), answers
	d.Restocks, d.SoldOutTTL = redisgate.NewRestocks(rdb), RestockFlagTTL
	env := start(t, clock, newFaults(), nil, d, gate, queue, store, rdb.Close, store.Close)
	env.Answers = answers
	env.Hot = func(id string) []string { return redisKeysOf(t, rdb, id) }
	listen, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { env.Service.ListenRestocks(listen); close(done) }()
	t.Cleanup(func() { stop(); <-done }) // before rdb closes: cleanups run last-registered first
	return env
}

// RestockFlagTTL is how long a distributed test node trusts its sold-out flags: long enough that
// a test sees a flag cleared by an announcement, not by its expiry.
const RestockFlagTTL = 10 * time.Second

// redisKeysOf lists the Redis keys of activity id (its own slot's, its stock shards', its
// line's), on every master of a cluster. A pass, which expires by itself, is not counted.
func redisKeysOf(t testing.TB, rdb redis.UniversalClient, id string) []string {
	ctx := context.Background()
	var mu sync.Mutex
	var keys []string
	scan := func(ctx context.Context, c *redis.Client) error {
		for _, match := range []string{"{act:" + id + "}:*", "{act:" + id + "/*", "{line:" + id + "}:*"} {
			iter := c.Scan(ctx, 0, match, 1000).Iterator()
			for iter.Next(ctx) {
				if !strings.Contains(iter.Val(), "}:pass:") {
					mu.Lock()
					keys = append(keys, iter.Val())
					mu.Unlock()
				}
			}
			if err := iter.Err(); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	default:
		t.Fatalf("redisKeysOf: a %T", rdb)
	}
	if err != nil {
		t.Fatalf("scan the keys of %s: %v", id, err)
	}
	return keys
}
