// Package nodetest builds the environments of the suites (saletest.Env) as the binary builds a
// node: with internal/node, from a Config, with its guards, breakers and limits. The suites in
// internal/saletest run on these environments; a test's faults (saletest.Faults) wrap the
// adapters below the guards, as a dependency that fails would.
package nodetest

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/breaker"
	"seckill/internal/node"
	"seckill/internal/redisstore"
	"seckill/internal/sale"
	"seckill/internal/saletest"
)

// Embedded builds the embedded node (the gate, the queue and the lines in the process, their
// journals and the store on SQLite) on t's temp dir, with a worker in the background. It stops
// when t ends.
func Embedded(t testing.TB, clock *saletest.Clock) saletest.Env {
	return EmbeddedOn(t, clock, "sqlite:"+filepath.Join(t.TempDir(), "db"))
}

// EmbeddedOn is Embedded on the database named by dsn (its store and, for SQLite, the queue file
// beside it; for MySQL and PostgreSQL the queue table in it).
func EmbeddedOn(t testing.TB, clock *saletest.Clock, dsn string) saletest.Env {
	env, n := open(t, clock, node.Config{DB: dsn})
	env.Hot = func(id string) []string {
		ctx := context.Background()
		var hot []string
		if _, err := n.Gate.Remaining(ctx, sale.Activity{ID: id}); err == nil { // the embedded gate knows its activities by id
			hot = append(hot, "gate")
		}
		if _, _, err := n.Ranking.Usage(ctx, id); err == nil {
			hot = append(hot, "leaderboard")
		}
		if st, err := n.Line.State(ctx, id); err == nil && st.Joined > 0 {
			hot = append(hot, "line")
		}
		return hot
	}
	return env
}

// Served builds the embedded node as Embedded does, with set's changes to its Config (its API's
// tokens, rate limits, risk rules and payment provider; its rate limits' wrapper), for a test of
// the whole site: n.Handler() is what the binary serves, the API and the pages. The node's own
// loops (the relays of a webhook configured, the leased jobs) are not started.
func Served(t testing.TB, clock *saletest.Clock, set func(c *node.Config)) (saletest.Env, *node.Node) {
	c := node.Config{DB: "sqlite:" + filepath.Join(t.TempDir(), "db")}
	set(&c)
	return open(t, clock, c)
}

// Started builds the embedded node as Served does and starts its own loops as the binary does
// (its worker, the relays: the refunds among them), for a test of what runs in them.
func Started(t testing.TB, clock *saletest.Clock, set func(c *node.Config)) (saletest.Env, *node.Node) {
	c := node.Config{DB: "sqlite:" + filepath.Join(t.TempDir(), "db")}
	set(&c)
	env, n := build(t, clock, c)
	n.Start()
	return env, n
}

// Distributed builds a node of the distributed mode: the Redis gate and stream queue on the
// Redis named by redisSpec (a URL or cluster seeds) and the store on dsn, with a worker in the
// background and the restock announcements heard. It stops when t ends.
func Distributed(t testing.TB, clock *saletest.Clock, redisSpec, dsn string) saletest.Env {
	env, n := open(t, clock, node.Config{DB: dsn, Redis: redisSpec, ClaimIdle: 30 * time.Second,
		Tuning: node.Tuning{SoldOutTTL: RestockFlagTTL,
			QueueList: 20 * time.Millisecond}}) // every random sale is a new activity: its first drain need not wait a second
	rdb, err := redisstore.Dial(context.Background(), redisSpec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	env.Hot = func(id string) []string { return redisKeysOf(t, rdb, id) }
	n.Go(func(ctx context.Context) { n.Service.ListenRestocks(ctx) })
	return env
}

// Idle builds a node of the distributed mode as Distributed does, but runs no worker: for a test
// that plays the workers itself (the node's own queue is one consumer of its streams, n.Queue).
func Idle(t testing.TB, clock *saletest.Clock, redisSpec, dsn string) *node.Node {
	_, n := build(t, clock, node.Config{DB: dsn, Redis: redisSpec, ClaimIdle: 30 * time.Second,
		Tuning: node.Tuning{QueueList: 20 * time.Millisecond}})
	return n
}

// Secret is the test nodes' JWT secret, unless their Config names one.
const Secret = "the suites' JWT secret, 32 bytes or more"

// RestockFlagTTL is how long a distributed test node trusts its sold-out flags: long enough that
// a test sees a flag cleared by an announcement, not by its expiry.
const RestockFlagTTL = 10 * time.Second

// open builds the node of c (see build) with a worker in the background.
func open(t testing.TB, clock *saletest.Clock, c node.Config) (saletest.Env, *node.Node) {
	env, n := build(t, clock, c)
	n.Go(func(ctx context.Context) { n.RunWorker(ctx, 16) })
	return env, n
}

// build builds the node of c, as the binary would (its guards' thresholds the binary's), on
// clock, with the test's faults below the guards.
func build(t testing.TB, clock *saletest.Clock, c node.Config) (saletest.Env, *node.Node) {
	faults := saletest.NewFaults()
	var answers *saletest.Answers
	c.GateLimits, c.DBLimits = breaker.GateThresholds, breaker.DatabaseThresholds
	c.RankExactMax, c.Now = saletest.ExactMax, clock.Now
	if c.API.JWTSecret == "" {
		c.API.JWTSecret = Secret
	}
	// The tests' gates stand still between steps: the reconcile need not wait long for grabs.
	c.Tuning.ReconcilePause, c.Tuning.QueuePoll, c.Tuning.GateBatch = 5*time.Millisecond, 50*time.Millisecond, 64
	c.Wrap.Gate, c.Wrap.Store, c.Wrap.Ranking, c.Wrap.Line = faults.Gate, faults.Store, faults.Ranking, faults.Line
	c.Wrap.Challenges = func(ch sale.ChallengeStore) sale.ChallengeStore { answers = saletest.NewAnswers(ch); return answers }
	n, err := node.Open(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	n.Store.EmitTo(saletest.Sink) // every suite's orders write their events, as a node with a webhook would
	// The suites' events go to their own sink, with no relay: they read the outbox themselves.
	features := n.Features
	features.Outbox = sale.NewOutbox(n.Store, clock.Now)
	if features.Payments == nil { // the suites pay at a provider of their own, on the node's guarded store
		features.Payments = sale.NewPayments(n.Service, n.DB, nil, &saletest.Provider{})
	}
	return saletest.Env{Service: n.Service, Features: features,
		Store: n.Store, Queue: n.Queue, Clock: clock, Drain: drainer(t, n.Queue, n.Store), Faults: faults, Answers: answers}, n
}

// drainWithin bounds a wait for a queue to drain: a liveness bound, not a speed test (a full
// race-enabled suite on two busy cores left a 3,000-share rain with 408 grabs unplaced at 10 s).
const drainWithin = 60 * time.Second

// drainer returns a Drain that waits until the queue holds none of an activity's grabs. A queue
// that is briefly unreachable (a Redis that has just restarted: the client redials within a
// second) is asked again; it must answer, and be empty, within drainWithin.
func drainer(t testing.TB, queue sale.Queue, store sale.Store) func(string) {
	return func(id string) {
		a, err := store.Activity(context.Background(), id)
		if err != nil {
			t.Fatalf("drain %s: %v", id, err)
		}
		deadline := time.Now().Add(drainWithin)
		for {
			n, err := queue.Depth(context.Background(), a)
			if err == nil && n == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("queue of %s still holds %d grabs after %s (last error: %v)", id, n, drainWithin, err)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}

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
