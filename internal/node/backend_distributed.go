package node

import (
	"context"
	"sync"
	"time"

	"seckill/internal/breaker"
	"seckill/internal/ratelimit"
	"seckill/internal/redisstore"
	"seckill/internal/risk"
	"seckill/internal/sale"
)

// restockFlagTTL is how long a node of a cluster trusts its sold-out flags: restocks are
// announced, so this only bounds how long a missed announcement keeps a unit unsold.
const restockFlagTTL = 5 * time.Second

// openDistributed builds the distributed backend on the Redis of SECKILL_REDIS (one server, a
// Cluster or a Sentinel-watched master): the gate and its streams, the rate limits, challenges,
// risk windows, leaderboards, lines and leases, each behind the one breaker of Redis.
func openDistributed(ctx context.Context, c Config, store sale.Store, name string) (backend, error) {
	redisstore.LogTo(c.Log)
	rdb, err := redisstore.Dial(ctx, c.Redis, redisstore.Via(c.RedisVia))
	if err != nil {
		return backend{}, err
	}
	activities := func(ctx context.Context) ([]sale.Activity, error) {
		return store.Activities(ctx, c.Now().Add(-sale.MaxPayWindow))
	}
	queue := redisstore.NewQueue(rdb, name, activities, 20*time.Millisecond, c.ClaimIdle).WithReplication(c.Replication)
	if c.Tuning.QueueList > 0 {
		queue = queue.WithListEvery(c.Tuning.QueueList)
	}
	guard := breaker.NewGuard("redis", c.GateLimits, time.Now).LogTo(c.Log)
	if topo := redisstore.NewTopology(rdb); topo != nil {
		guard.WithTopology(topo.Classify)
	}
	gate := redisstore.New(rdb).WithReplication(c.Replication)
	var windows risk.Windows
	if c.Role != RoleWorker { // a worker judges no grab
		windows = breaker.GuardRiskWindows(redisstore.NewRiskWindows(rdb, risk.DefaultWindow), guard)
	}
	var once sync.Once
	return backend{gate: breaker.GuardGate(c.wrapGate(gate), guard), guard: guard, queue: queue, lease: redisstore.NewLease(rdb),
		riskWindows: windows,
		settle: func(ctx context.Context) (int, error) {
			acts, err := activities(ctx)
			if err != nil {
				return 0, err
			}
			return gate.Settle(ctx, acts, settleAfter, c.Now())
		},
		linger: 50 * time.Millisecond, userAtGate: true,
		windows:  breaker.GuardLimiter(ratelimit.NewRedisWindows(rdb, time.Now), guard),
		buckets:  breaker.GuardLimiter(c.wrapBuckets(ratelimit.NewRedisBuckets(rdb)), guard),
		restocks: redisstore.NewRestocks(rdb), challenges: breaker.GuardChallenges(c.wrapChallenges(redisstore.NewChallenges(rdb)), guard),
		line:    breaker.GuardLine(c.wrapLine(redisstore.NewLine(rdb).WithReplication(c.Replication)), guard),
		ranking: breaker.GuardRanking(c.wrapRanking(redisstore.NewRanking(rdb, c.RankExactMax)), guard),
		ping:    func(ctx context.Context) error { return redisstore.Ping(ctx, rdb) },
		close:   func() { once.Do(func() { rdb.Close() }) }}, nil
}
