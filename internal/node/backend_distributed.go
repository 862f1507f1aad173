package node

import (
	"context"
	"sync"
	"time"

	"seckill/internal/health"
	"seckill/internal/ratelimit"
	"seckill/internal/redisgate"
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
	redisgate.LogTo(c.Log)
	rdb, err := redisgate.Dial(ctx, c.Redis)
	if err != nil {
		return backend{}, err
	}
	activities := func(ctx context.Context) ([]sale.Activity, error) {
		return store.Activities(ctx, c.Now().Add(-sale.MaxPayWindow))
	}
	queue := redisgate.NewQueue(rdb, name, activities, 20*time.Millisecond, c.ClaimIdle)
	if c.Tuning.QueueList > 0 {
		queue = queue.WithListEvery(c.Tuning.QueueList)
	}
	guard := health.NewGuard("redis", c.GateLimits, time.Now)
	if topo := redisgate.NewTopology(rdb); topo != nil {
		guard.WithTopology(topo.Classify)
	}
	gate := redisgate.New(rdb).WithReplication(c.Replication)
	var windows risk.Windows
	if c.Role != RoleWorker { // a worker judges no grab
		windows = health.GuardRiskWindows(redisgate.NewRiskWindows(rdb, risk.DefaultWindow), guard)
	}
	var once sync.Once
	return backend{gate: health.GuardGate(c.wrapGate(gate), guard), guard: guard, queue: queue, lease: redisgate.NewLease(rdb),
		riskWindows: windows,
		settle: func(ctx context.Context) (int, error) {
			acts, err := activities(ctx)
			if err != nil {
				return 0, err
			}
			return gate.Settle(ctx, acts, settleAfter, c.Now())
		},
		linger: 50 * time.Millisecond, userAtGate: true,
		windows:  health.GuardLimiter(ratelimit.NewRedisWindows(rdb, time.Now), guard),
		buckets:  health.GuardLimiter(ratelimit.NewRedisBuckets(rdb), guard),
		restocks: redisgate.NewRestocks(rdb), challenges: health.GuardChallenges(c.wrapChallenges(redisgate.NewChallenges(rdb)), guard),
		line:    health.GuardLine(redisgate.NewLine(rdb).WithReplication(c.Replication), guard),
		ranking: health.GuardRanking(redisgate.NewRanking(rdb, c.RankExactMax), guard),
		ping:    func(ctx context.Context) error { return redisgate.Ping(ctx, rdb) },
		close:   func() { once.Do(func() { rdb.Close() }) }}, nil
}
