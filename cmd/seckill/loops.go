package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"seckill/internal/kafka"
	"seckill/internal/metrics"
	"seckill/internal/relay"
	"seckill/internal/sale"
	"seckill/internal/webhook"
	"seckill/internal/worker"
)

// sinks are the receivers of the order events the configuration names.
func (c config) sinks() ([]relay.Sink, error) {
	var out []relay.Sink
	for _, u := range c.webhooks {
		s, err := webhook.New(u, []byte(c.webhookSecret))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if len(c.kafkaBrokers) > 0 {
		s, err := kafka.New(c.kafkaBrokers, c.kafkaTopic)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// startLoops starts, in wg until ctx ends, the node's background loops: on every node the cache
// reloads, the restock announcements and the settling of sharded stocks' reservations; on a
// worker node (role all or worker) the order worker, the lines' drainer, the payment-window
// sweeper, the relays of the order events and the leased jobs (archive, the purge of the
// delivered events, reconcile).
func startLoops(ctx context.Context, wg *sync.WaitGroup, c config, b backend, db sale.Store, svc *sale.Service,
	stats *metrics.Metrics, log *slog.Logger, sinks []relay.Sink) {
	if b.restocks != nil {
		wg.Go(func() { listenRestocks(ctx, svc, log) })
	}
	wg.Go(func() { reloadCaches(ctx, svc, log) })
	if b.settle != nil {
		wg.Go(func() { settleReservations(ctx, b.settle, log) })
	}
	placed := func(ps []sale.Placement) {
		stats.Placed(ps)
		if err := svc.OrdersPlaced(ctx, ps); err != nil {
			log.Warn("leaderboard", "err", err) // the database fallback still answers
		}
	}
	if b.onPlaced != nil {
		b.onPlaced(placed) // the orders the gate's commits place themselves (embedded)
	}
	if c.role == roleAPI {
		return
	}
	wg.Go(func() {
		(&worker.Worker{Queue: b.queue, Store: db, Log: log, Batch: 256, Linger: b.linger, Placed: placed,
			Buried: func(n int) { stats.Order("dead_lettered", n) }}).Run(ctx)
	})
	wg.Go(func() {
		svc.NewDrainer(consumerName(), drainTick).Observe(stats.Admitted).Run(ctx, throttled(5*time.Second,
			func(activityID string, err error, repeats int) {
				log.Warn("drain the line", "activity", activityID, "err", err, "failed_rounds", repeats)
			}))
	})
	wg.Go(func() {
		(&worker.Sweeper{Service: svc, Log: log, Every: c.sweepEvery, Batch: 256,
			Expired: func(n int) { stats.Order("expired", n) }}).Run(ctx)
	})
	for _, sink := range sinks {
		wg.Go(func() {
			(&relay.Relay{Store: db, Sink: sink, Lease: b.lease, Holder: consumerName(), Log: log,
				Delivered: func(sale.EventDelivery) { stats.Relayed("delivered") },
				Failed: func(_ sale.EventDelivery, _ error, parked bool) {
					if parked {
						stats.Relayed("parked")
					} else {
						stats.Relayed("failed")
					}
				}}).Run(ctx)
		})
	}
	if c.archiveAfter > 0 {
		wg.Go(func() {
			(&worker.Archiver{Service: svc, Lease: b.lease, Holder: consumerName(), Every: min(archiveEvery, c.archiveAfter),
				Keep: c.archiveAfter, Log: log}).Run(ctx)
		})
	}
	if c.eventsKeep > 0 {
		wg.Go(func() {
			(&worker.EventPurger{Service: svc, Lease: b.lease, Holder: consumerName(), Every: min(purgeEvery, c.eventsKeep),
				Keep: c.eventsKeep, Log: log}).Run(ctx)
		})
	}
	if c.reconcileEvery > 0 {
		wg.Go(func() {
			(&worker.Reconciler{Service: svc, Lease: b.lease, Holder: consumerName(), Every: c.reconcileEvery,
				Repair: c.reconcileRepair, Log: log, Checked: stats.Reconciled,
				Done: func(checked []string) { stats.ReconcileRound(checked, time.Now()) }}).Run(ctx)
		})
	}
}

// blocksEvery is how often a node reloads the blacklist and the activities: a change made
// through another node (an entry, an activity with its own rate limits) takes effect here within it.
const blocksEvery = 2 * time.Second

// reloadCaches keeps this node's copies of the blacklist and of the activities fresh until ctx
// ends. A failed reload keeps the copy it had.
func reloadCaches(ctx context.Context, svc *sale.Service, log *slog.Logger) {
	every(ctx, blocksEvery, func() {
		if err := svc.ReloadBlocks(ctx); err != nil && ctx.Err() == nil {
			log.Warn("blacklist", "err", err)
		}
		if err := svc.ReloadActivities(ctx); err != nil && ctx.Err() == nil {
			log.Warn("activities", "err", err)
		}
	})
}

// throttled passes an activity's failures to report at most once every d, with how many
// rounds failed since the last report: a drainer whose dependency is down fails ten rounds a
// second, and one line a few seconds says as much.
func throttled(d time.Duration, report func(activityID string, err error, repeats int)) func(string, error) {
	type last struct {
		at      time.Time
		repeats int
	}
	seen := map[string]*last{} // the drainer reports from its one goroutine
	return func(activityID string, err error) {
		l := seen[activityID]
		if l == nil {
			l = &last{}
			seen[activityID] = l
		}
		l.repeats++
		if now := time.Now(); now.Sub(l.at) >= d {
			report(activityID, err, l.repeats)
			l.at, l.repeats = now, 0
		}
	}
}

// every runs fn every d until ctx ends.
func every(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// settleAfter is how old a sharded stock's reservation must be before the sweeper settles it:
// far longer than a grab can take, so that it only finishes the abandoned ones.
const settleAfter = 30 * time.Second

// settleReservations runs settle every 10 s until ctx ends.
func settleReservations(ctx context.Context, settle func(ctx context.Context) (int, error), log *slog.Logger) {
	every(ctx, 10*time.Second, func() {
		if n, err := settle(ctx); err != nil && ctx.Err() == nil {
			log.Warn("settle sharded stock reservations", "err", err)
		} else if n > 0 {
			log.Info("settled abandoned reservations", "n", n)
		}
	})
}

// listenRestocks clears this node's sold-out flags when another node restocks, until ctx ends. A
// subscription that cannot be made (Redis away) is tried again every second.
func listenRestocks(ctx context.Context, svc *sale.Service, log *slog.Logger) {
	for ctx.Err() == nil {
		if err := svc.ListenRestocks(ctx); err != nil {
			log.Warn("restock announcements", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// archiveEvery is how often a node looks for activities to archive (more often when they are
// kept for less).
const archiveEvery = time.Minute

// purgeEvery is how often a node purges the order events every sink took (more often when they
// are kept for less). A round with nothing to delete reads one batch of the oldest events.
const purgeEvery = time.Minute

// drainTick is how often a node's drainer admits tickets from the lines it leads.
const drainTick = 100 * time.Millisecond
