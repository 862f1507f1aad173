package node

import (
	"context"
	"log/slog"
	"time"

	"seckill/internal/kafka"
	"seckill/internal/relay"
	"seckill/internal/sale"
	"seckill/internal/webhook"
	"seckill/internal/worker"
)

// sinks are the receivers of the order events the configuration names.
func (c Config) sinks() ([]relay.Sink, error) {
	var out []relay.Sink
	for _, u := range c.Webhooks {
		s, err := webhook.New(u, []byte(c.WebhookSecret))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if len(c.KafkaBrokers) > 0 {
		s, err := kafka.New(c.KafkaBrokers, c.KafkaTopic)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// startLoops starts the node's background loops, until Close: on every node the cache reloads,
// the flush of the reservation sales' arrivals, the risk files' watcher, the restock announcements and the settling of sharded stocks' reservations; on a worker node
// (role all or worker) the order worker, the lines' drainer, the payment-window sweeper, the
// relays of the order events and the leased jobs (the reservation sales' waves, archive, the
// purge of the delivered events, reconcile).
func (n *Node) startLoops() {
	c, b, svc, stats, log := n.Config, n.b, n.Service, n.Metrics, n.Config.Log
	if b.restocks != nil {
		n.Go(func(ctx context.Context) { listenRestocks(ctx, svc, log) })
	}
	n.Go(func(ctx context.Context) { reloadCaches(ctx, svc, n.Blocks, log) })
	n.Go(func(ctx context.Context) { flushArrivals(ctx, n.Forecasts, log) })
	if c.API.Risk.watched() { // the rules alone read no file
		n.Go(func(ctx context.Context) { watchRisk(ctx, n.Risk, log) })
	}
	if b.settle != nil {
		n.Go(func(ctx context.Context) { settleReservations(ctx, b.settle, log) })
	}
	if c.Role == RoleAPI {
		n.placedBy(nil)
		return
	}
	n.Go(func(ctx context.Context) { n.RunWorker(ctx, 256) })
	n.Go(func(ctx context.Context) {
		n.Lines.NewDrainer(n.name, drainTick).Observe(stats.Admitted).Run(ctx, throttled(5*time.Second,
			func(activityID string, err error, repeats int) {
				log.Warn("drain the line", "activity", activityID, "err", err, "failed_rounds", repeats)
			}))
	})
	if c.SweepEvery > 0 {
		n.Go(func(ctx context.Context) {
			(&worker.Sweeper{Service: svc, Log: log, Every: c.SweepEvery, Batch: 256,
				Expired: func(n int) { stats.Order("expired", n) }}).Run(ctx)
		})
	}
	for _, sink := range n.Sinks {
		n.Go(func(ctx context.Context) {
			(&relay.Relay{Store: n.DB, Sink: sink, Lease: b.lease, Holder: n.name, Log: log,
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
	n.Go(func(ctx context.Context) {
		(&worker.WaveOpener{Reservations: n.Reservations, Lease: b.lease, Holder: n.name, Every: openWavesEvery, Log: log}).Run(ctx)
	})
	if c.RemindBefore > 0 && n.Outbox != nil {
		n.Go(func(ctx context.Context) {
			(&worker.WaveReminder{Reservations: n.Reservations, Before: c.RemindBefore, Lease: b.lease, Holder: n.name,
				Every: remindEvery, Log: log}).Run(ctx)
		})
	}
	if c.ArchiveAfter > 0 {
		n.Go(func(ctx context.Context) {
			(&worker.Archiver{Service: svc, Lease: b.lease, Holder: n.name, Every: min(archiveEvery, c.ArchiveAfter),
				Keep: c.ArchiveAfter, Log: log}).Run(ctx)
		})
	}
	if c.EventsKeep > 0 && n.Outbox != nil {
		n.Go(func(ctx context.Context) {
			(&worker.EventPurger{Outbox: n.Outbox, Lease: b.lease, Holder: n.name, Every: min(purgeEvery, c.EventsKeep),
				Keep: c.EventsKeep, Log: log}).Run(ctx)
		})
	}
	if c.ReconcileEvery > 0 {
		n.Go(func(ctx context.Context) {
			(&worker.Reconciler{Service: svc, Lease: b.lease, Holder: n.name, Every: c.ReconcileEvery,
				Repair: c.ReconcileRepair, Log: log, Checked: stats.Reconciled,
				Done: func(checked []string) { stats.ReconcileRound(checked, time.Now()) }}).Run(ctx)
		})
	}
}

// rank puts the shares of the orders ps placed on their leaderboards, trying again while the
// leaderboards' store is away (Redis failing over, a connection reset), for up to rankRetryFor:
// a share left off an exact board would stay off it until the next load, and the worker cannot
// acknowledge the grabs meanwhile either. The database's fallback answers in the meantime.
func (n *Node) rank(ctx context.Context, ps []sale.Placement) {
	err := n.Boards.OrdersPlaced(ctx, ps)
	deadline := time.Now().Add(rankRetryFor)
	for pause := rankFirstPause; err != nil && time.Now().Before(deadline); pause = min(2*pause, rankMaxPause) {
		select {
		case <-ctx.Done():
			n.Config.Log.Warn("leaderboard", "err", err)
			return
		case <-time.After(pause):
		}
		err = n.Boards.OrdersPlacedAgain(ctx, ps)
	}
	if err != nil {
		n.Config.Log.Warn("leaderboard", "err", err, "gave_up_after", rankRetryFor)
	}
}

// How rank tries again: after 50 ms, then twice as long each time up to a second, for up to the
// failover grace's default (a Cluster's or Sentinel's takeover).
const (
	rankFirstPause = 50 * time.Millisecond
	rankMaxPause   = time.Second
	rankRetryFor   = 20 * time.Second
)

// RunWorker turns the queue's grabs into orders, batch at most at a time, until ctx ends: the
// worker of a worker node (Start runs it), or a suite's own.
func (n *Node) RunWorker(ctx context.Context, batch int) {
	placed := n.placedBy(ctx)
	(&worker.Worker{Queue: n.Queue, Store: n.DB, Log: n.Config.Log, Batch: batch, Linger: n.b.linger, Placed: placed,
		Buried: func(k int) { n.Metrics.Order("dead_lettered", k) }}).Run(ctx)
}

// placedBy returns what the orders placed are told to (the metrics, the leaderboards), and
// registers it for the orders the gate's commits place themselves (embedded), once.
func (n *Node) placedBy(ctx context.Context) func([]sale.Placement) {
	if ctx == nil {
		ctx = n.loops
	}
	placed := func(ps []sale.Placement) {
		n.Metrics.Placed(ps)
		n.rank(ctx, ps)
	}
	n.onPlaced.Do(func() {
		if n.b.onPlaced != nil {
			n.b.onPlaced(placed)
		}
	})
	return placed
}

// ReloadEvery is how often a node reloads the blacklist and the activities: a change made
// through another node (an entry, an activity with its own rate limits) takes effect here within it.
const ReloadEvery = 2 * time.Second

// reloadCaches keeps this node's copies of the blacklist and of the activities fresh until ctx
// ends. A failed reload keeps the copy it had.
func reloadCaches(ctx context.Context, svc *sale.Service, blocks *sale.Blocks, log *slog.Logger) {
	every(ctx, ReloadEvery, func() {
		if err := blocks.Reload(ctx); err != nil && ctx.Err() == nil {
			log.Warn("blacklist", "err", err)
		}
		if err := svc.ReloadActivities(ctx); err != nil && ctx.Err() == nil {
			log.Warn("activities", "err", err)
		}
	})
}

// flushArrivals adds the reservation sales' arrivals this node counted to the database every
// arrivalsEvery, and once more when the node stops.
func flushArrivals(ctx context.Context, f *sale.Forecasts, log *slog.Logger) {
	flush := func(ctx context.Context) {
		if _, err := f.Flush(ctx); err != nil && ctx.Err() == nil {
			log.Warn("the reservation sales' arrivals", "err", err)
		}
	}
	every(ctx, arrivalsEvery, func() { flush(ctx) })
	last, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	flush(last)
}

// arrivalsEvery is how often a node adds the reservation sales' arrivals it counted to the
// database: a node killed loses at most that long of them (the forecast's history, not a sale).
const arrivalsEvery = 2 * time.Second

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

// openWavesEvery is how often a node looks for reservation sales that started (one call to the
// gate per sale, and a lease's): the first wave waits at most that long after the start, and
// the time to copy its reservers into the gate, before it is admitted (the grabs meanwhile are
// WAVE_NOT_OPEN, retry in a second).
const openWavesEvery = 250 * time.Millisecond

// drainTick is how often a node's drainer admits tickets from the lines it leads.
const drainTick = 100 * time.Millisecond

// remindEvery is how often a node looks for reservation sales' waves to remind of: a reminder is
// written at most that long after its moment.
const remindEvery = time.Second
