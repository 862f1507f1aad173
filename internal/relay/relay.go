// Package relay delivers the outbox's order events to a sink (a webhook receiver, a Kafka
// topic): at least once, an order's events in the order they happened, retried with exponential
// backoff and jitter, parked after too many failures until an operator replays them. One node
// of many relays a sink at a time, the one holding its lease.
package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"seckill/internal/sale"
)

// Sink is where events go. Deliver returns nil once the sink has the event; it may be called
// again for an event it has (after a crash before the delivery was recorded): the event's ID is
// the same.
type Sink interface {
	Name() string
	Deliver(ctx context.Context, e sale.Event) error
}

// Relay delivers the events of Store to Sink.
type Relay struct {
	Store  sale.EventStore
	Sink   Sink
	Lease  sale.Lease
	Holder string // this node's name, unique among the nodes
	Log    *slog.Logger
	Now    func() time.Time // nil: time.Now

	// Every is how long the relay waits when it found nothing to send (zero: 250 ms).
	Every time.Duration
	// Parallel is how many orders' events are sent at once (zero: 16); one order's are sent one
	// after the other.
	Parallel int
	// MaxAttempts is how many times an event is tried before it is parked (zero: 12: about an
	// hour and a half of backoff).
	MaxAttempts int
	// Backoff is the wait before attempt n+1 after n failures (nil: Backoff).
	Backoff func(failures int) time.Duration
	// LeaseTTL is how long the sink's lease lasts unless extended (zero: DefaultLeaseTTL): how
	// soon another node takes over the sink from one that died.
	LeaseTTL time.Duration

	// Delivered and Failed, when set, are told of each attempt (metrics); parked says whether
	// the event was given up on.
	Delivered func(e sale.EventDelivery)
	Failed    func(e sale.EventDelivery, err error, parked bool)
}

// Defaults of a Relay.
const (
	DefaultEvery       = 250 * time.Millisecond
	DefaultParallel    = 16
	DefaultMaxAttempts = 12
	DefaultLeaseTTL    = 15 * time.Second // extended while a round runs (see Round)
)

// Backoff is the default wait after failures: 1 s, doubled each time up to 20 min, each drawn at
// random between half and all of that (jitter, so that receivers back from an outage are not
// met by every event at once).
func Backoff(failures int) time.Duration {
	d := time.Second << min(max(failures-1, 0), 11)
	d = min(d, 20*time.Minute)
	return d/2 + rand.N(d/2+1)
}

// LeaseName is the lease a relay of sink holds.
func LeaseName(sink string) string { return "relay:" + sink }

func (r *Relay) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Run relays until ctx ends.
func (r *Relay) Run(ctx context.Context) {
	every := r.Every
	if every <= 0 {
		every = DefaultEvery
	}
	for ctx.Err() == nil {
		n, err := r.Round(ctx)
		if err != nil && ctx.Err() == nil {
			r.Log.Warn("relay", "sink", r.Sink.Name(), "err", err)
		}
		if n == 0 || err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(every):
			}
		}
	}
}

// Round sends the events due now, if this node holds the sink's lease, and returns how many it
// tried.
//
// A round can outlast the lease: up to 4*Parallel posts, each allowed the sink's timeout (10 s),
// take minutes against a slow receiver, and a lease that ran out meanwhile lets a second node
// read the outbox and send the same orders' next events while this one still sends what it
// read before them: an order's creation would reach the receiver after its payment. So the
// round keeps its lease (keepLease): it is extended every third of its ttl while the round
// runs, and the round stops sending, its posts in flight cut off, as soon as another node holds
// the lease or the last extension that succeeded is too old to be sure of it.
//
// Renewing is the sound choice here rather than fencing with the lease's epoch: a fencing token
// protects a store that checks it, and the writes that must not overlap are the posts to the
// sink (a shop's webhook, a Kafka topic), which knows nothing of our leases; the outbox's own
// writes are safe to make twice. The round's deadline is taken on this node's clock from the
// moment it asked for the extension, before the lease store set it, so the lease cannot run
// out on the store before this node stops; a Redis failover that loses the lease key early
// (see redisstore.Lease) is met at the next extension, within a third of the ttl. A post the
// receiver had taken before it was cut off may still be processed; its event stays pending
// and is sent again, with its id, as after a crash.
func (r *Relay) Round(ctx context.Context) (int, error) {
	ttl := r.LeaseTTL
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	name := LeaseName(r.Sink.Name())
	asked := time.Now()
	held, err := r.Lease.Hold(ctx, name, r.Holder, ttl)
	if err != nil || !held {
		return 0, err
	}
	ctx, release := r.keepLease(ctx, name, ttl, asked)
	defer release()
	parallel := r.Parallel
	if parallel <= 0 {
		parallel = DefaultParallel
	}
	ds, err := r.Store.Deliverable(ctx, r.Sink.Name(), r.now(), 4*parallel)
	if err != nil || len(ds) == 0 {
		return 0, err
	}
	// Deliverable gives at most one event per order: they may all go at once.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	work := make(chan sale.EventDelivery)
	for range min(parallel, len(ds)) {
		wg.Go(func() {
			for d := range work {
				if ctx.Err() != nil {
					continue // the lease is lost: what is left stays due, for its new holder
				}
				if err := r.deliver(ctx, d); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
feed:
	for _, d := range ds {
		select {
		case work <- d:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if cause := context.Cause(ctx); errors.Is(cause, ErrLeaseLost) {
		errs = append(errs, cause)
	}
	return len(ds), errors.Join(errs...)
}

// ErrLeaseLost ends a round whose node could no longer be sure it held the sink's lease.
var ErrLeaseLost = errors.New("relay: the sink's lease is lost")

// keepLease keeps the lease name, taken for ttl by a call made at asked, for as long as the
// round runs: it extends it every ttl/3, and ends the round's context (with ErrLeaseLost as its
// cause) when another node holds it, or when leaseMargin before the lease could run out no
// extension has succeeded. release stops it once the round is over.
func (r *Relay) keepLease(ctx context.Context, name string, ttl time.Duration, asked time.Time) (round context.Context, release func()) {
	round, cancel := context.WithCancelCause(ctx)
	margin := ttl / leaseMargin
	until := asked.Add(ttl - margin)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(ttl / 3)
		defer tick.Stop()
		expiry := time.NewTimer(time.Until(until))
		defer expiry.Stop()
		for {
			select {
			case <-done:
				return
			case <-round.Done():
				return
			case <-expiry.C:
				cancel(fmt.Errorf("%w: not extended for %s", ErrLeaseLost, ttl-margin))
				return
			case <-tick.C:
			}
			at := time.Now()
			hold, stop := context.WithDeadline(round, until)
			held, err := r.Lease.Hold(hold, name, r.Holder, ttl)
			stop()
			switch {
			case err == nil && held:
				until = at.Add(ttl - margin)
				expiry.Reset(time.Until(until))
			case err == nil:
				cancel(fmt.Errorf("%w: another node holds it", ErrLeaseLost))
				return
			case round.Err() == nil: // tried again at the next tick, until the lease may have run out
				r.Log.Warn("relay: extend the lease", "sink", r.Sink.Name(), "err", err)
			}
		}
	})
	return round, func() {
		close(done)
		wg.Wait()
		cancel(nil)
	}
}

// leaseMargin: a round stops ttl/leaseMargin before its lease could run out, for the time its
// posts take to be cut off and for the clocks' drift.
const leaseMargin = 10

// deliver sends d once and records what came of it; the error is the outbox's, not the sink's.
func (r *Relay) deliver(ctx context.Context, d sale.EventDelivery) error {
	sendErr := r.Sink.Deliver(ctx, d.Event)
	// Recorded even when ctx has just ended: the sink may have the event.
	rec := context.WithoutCancel(ctx)
	if sendErr == nil {
		if r.Delivered != nil {
			r.Delivered(d)
		}
		return r.Store.Delivered(rec, d.Sink, d.ID, r.now())
	}
	if ctx.Err() != nil {
		return nil // stopping: the attempt does not count, the event stays due
	}
	limit := r.MaxAttempts
	if limit <= 0 {
		limit = DefaultMaxAttempts
	}
	backoff := r.Backoff
	if backoff == nil {
		backoff = Backoff
	}
	failures := d.Attempts + 1
	park := failures >= limit
	if r.Failed != nil {
		r.Failed(d, sendErr, park)
	}
	if park {
		r.Log.Warn("relay: an event is parked", "sink", d.Sink, "event", d.ID, "attempts", failures, "err", sendErr)
	}
	return r.Store.Failed(rec, d.Sink, d.ID, sendErr.Error(), r.now().Add(backoff(failures)), park)
}
