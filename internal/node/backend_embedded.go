package node

import (
	"cmp"
	"context"
	"sync"
	"time"

	"seckill/internal/breaker"
	"seckill/internal/embedded"
	"seckill/internal/ratelimit"
	"seckill/internal/sale"
	"seckill/internal/sqlstore"
)

// maxChallenges bounds the unanswered challenges one embedded node keeps (about 100 B each).
const maxChallenges = 1 << 20

// openEmbedded builds the embedded backend: the gate, the line and their journals in the process,
// the queue a table beside the database (SQLite's in a file of its own) for the grabs the gate's
// commits could not place as orders themselves.
func openEmbedded(ctx context.Context, c Config, store sale.Store) (backend, error) {
	journal, err := sqlstore.OpenJournal(ctx, c.DB)
	if err != nil {
		return backend{}, err
	}
	lines, err := sqlstore.OpenLineJournal(ctx, c.DB)
	if err != nil {
		journal.Close()
		return backend{}, err
	}
	line, err := embedded.OpenLine(ctx, lines, store.Activity)
	if err != nil {
		journal.Close()
		lines.Close()
		return backend{}, err
	}
	queue := embedded.NewQueue(journal, cmp.Or(c.Tuning.QueuePoll, defaultQueuePoll), 20*time.Millisecond)
	// Each batch of grabs is placed as orders in the transaction that makes it durable; only
	// what the database cannot take then goes through the journal and the worker.
	placing := embedded.NewPlacing(store, journal, queue.Wake, c.Log)
	gate := embedded.NewGate(placing, cmp.Or(c.Tuning.GateBatch, defaultGateBatch), nil)
	guard := breaker.NewGuard("journal", c.GateLimits, time.Now).LogTo(c.Log)
	var once sync.Once
	return backend{gate: breaker.GuardGate(c.wrapGate(gate), guard), guard: guard, queue: queue, ping: journal.Ping,
		challenges: c.wrapChallenges(embedded.NewChallenges(maxChallenges)), ranking: c.wrapRanking(embedded.NewRanking(c.RankExactMax)),
		windows: ratelimit.NewWindows(time.Now), buckets: c.wrapBuckets(ratelimit.NewBuckets(time.Now)), line: breaker.GuardLine(c.wrapLine(line), guard),
		lease: embedded.NewLease(time.Now), onPlaced: placing.OnPlaced,
		close: func() {
			once.Do(func() { line.Close(); lines.Close(); gate.Close(); journal.Close() })
		}}, nil
}
