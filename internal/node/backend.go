package node

import (
	"context"
	"time"

	"seckill/internal/breaker"
	"seckill/internal/ratelimit"
	"seckill/internal/risk"
	"seckill/internal/sale"
)

// backend is what a node runs on besides its database: the stock gate and its queue, and the
// stores kept beside them (rate limits, challenges, leaderboards, lines, leases), with how to
// check and close them. The embedded one lives in the process (backend_embedded.go), the
// distributed one on Redis (backend_distributed.go).
type backend struct {
	gate  sale.Gate
	queue sale.Queue
	ping  func(ctx context.Context) error
	close func()
	// linger is the worker's wait after a short batch (see worker.Worker.Linger). The embedded
	// queue gathers its own batches; a stream hands out whatever has arrived.
	linger time.Duration
	// windows and buckets keep the rate limits: in the process, or on Redis for the cluster.
	windows, buckets ratelimit.Limiter
	// restocks tells the other nodes of a restock (distributed mode; nil: one node).
	restocks sale.Restocks
	// challenges keeps the anti-bot questions until they are answered.
	challenges sale.ChallengeStore
	// settle finishes the grabs of sharded stocks left half-way (distributed mode; nil: none).
	settle func(ctx context.Context) (int, error)
	// guard is the circuit breaker and health record of the gate's backend (Redis, or the
	// embedded journal), through which every call above goes.
	guard *breaker.Guard
	// ranking keeps the red packets' leaderboards beside the gate.
	ranking sale.Ranking
	// line keeps the waiting lines of queue and lottery activities.
	line sale.Line
	// lease lets one node at a time run the scheduled jobs (reconcile, archive).
	lease sale.Lease
	// onPlaced, when set, registers what is told of the orders the gate's commits place
	// themselves, as the worker's Placed is of the orders it places (embedded: embedded.Placing).
	onPlaced func(func([]sale.Placement))
	// userAtGate says the gate checks a grab's per-user rate in its own call (the Redis gate:
	// one Redis call and one fsync wait a grab, not two; see httpapi.Limits.UserAtGate).
	userAtGate bool
	// riskWindows keeps the risk engine's windows for every node (distributed mode: on Redis);
	// nil: each node's own memory, right for the one embedded node.
	riskWindows risk.Windows
}

// openBackend opens the embedded backend or, when SECKILL_REDIS is set, the distributed one.
// store is the guarded database: the gate's and the line's lookups of activities go through its
// breaker like the service's.
func openBackend(ctx context.Context, c Config, store sale.Store, name string) (backend, error) {
	if c.Redis == "" {
		return openEmbedded(ctx, c, store)
	}
	return openDistributed(ctx, c, store, name)
}

// wrapGate puts c's wrapper on g, below the guard.
func (c Config) wrapGate(g sale.Gate) sale.Gate {
	if c.Wrap.Gate != nil {
		return c.Wrap.Gate(g)
	}
	return g
}

// wrapBuckets puts c's wrapper on b, the rate limits' token buckets, below the guard.
func (c Config) wrapBuckets(b ratelimit.Limiter) ratelimit.Limiter {
	if c.Wrap.Buckets != nil {
		return c.Wrap.Buckets(b)
	}
	return b
}

// wrapRanking puts c's wrapper on r, the leaderboards, below the guard.
func (c Config) wrapRanking(r sale.Ranking) sale.Ranking {
	if c.Wrap.Ranking != nil {
		return c.Wrap.Ranking(r)
	}
	return r
}

// wrapLine puts c's wrapper on l, the waiting lines, below the guard.
func (c Config) wrapLine(l sale.Line) sale.Line {
	if c.Wrap.Line != nil {
		return c.Wrap.Line(l)
	}
	return l
}

// wrapChallenges puts c's wrapper on ch, below the guard.
func (c Config) wrapChallenges(ch sale.ChallengeStore) sale.ChallengeStore {
	if c.Wrap.Challenges != nil {
		return c.Wrap.Challenges(ch)
	}
	return ch
}
