package embedded

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"seckill/internal/sale"
	"seckill/internal/tracing"
)

// Writer makes a batch of the gate's grabs durable: when AppendGrabs returns nil, every grab of
// the batch survives a crash. A sale.Journal is one; Placing is the other.
type Writer interface {
	AppendGrabs(ctx context.Context, gs []sale.Grab) error
}

var _ Writer = (*Placing)(nil)

// Placing is the embedded gate's writer when the gate and the database live in one process: it
// places each batch of grabs as orders, in the one database transaction that makes them
// durable, so that an acknowledged grab is an order already and nothing is left for the worker
// to move (one write a grab, not the journal's append, then the worker's read, its order and
// its delete). The database's guards decide each order as they do for the worker: a grab they
// refuse is a FAILED order.
//
// A batch the database cannot take (it is away, or refuses one of the batch's grabs as
// unplaceable) goes to the journal instead, where the worker places it as before: retried while
// the database is away, and the grab it can never place dead-lettered alone. So does a batch the
// database has not placed within PlaceWithin: the one SQLite writer may be busy with another
// transaction (a sweep, an archive), and the journal, a file of its own, does not wait behind
// it. Such a placement is not cut short: it goes on (for up to PlaceAtMost), so that it learns
// whether it created the orders, and tells of those it did, as the worker tells of those it
// creates from the journal: each order is told of once, by whoever created it (a red packet's
// histogram counts each share once; it cannot tell a share counted from one that is not). Either
// way the batch is durable before the gate answers.
type Placing struct {
	// PlaceWithin bounds the wait for a batch's placement before it goes to the journal instead;
	// PlaceAtMost bounds the placement itself.
	PlaceWithin, PlaceAtMost time.Duration

	store   sale.Placer
	journal Writer
	queued  func()
	log     *slog.Logger
	placed  atomic.Pointer[func([]sale.Placement)]
}

// NewPlacing returns the writer that places through store and falls back to journal, calling
// queued after each batch it journals (the queue's wake-up).
func NewPlacing(store sale.Placer, journal Writer, queued func(), log *slog.Logger) *Placing {
	if queued == nil {
		queued = func() {}
	}
	return &Placing{PlaceWithin: placeWithin, PlaceAtMost: placeAtMost, store: store, journal: journal, queued: queued, log: log}
}

// placeAtMost is how long a placement the gate stopped waiting for may go on: a database hung
// longer than that leaves it to the worker's placing of the journaled batch, which finds the
// orders by their tokens if this one committed all the same.
const placeAtMost = 30 * time.Second

// placeWithin is Placing's default bound: a batch of 256 orders takes 4–5 ms on SQLite here, and
// up to 25 ms beside a crowd on the same two cores (docs/BENCHMARKS.md §10).
const placeWithin = 250 * time.Millisecond

// OnPlaced sets what is told of every batch placed here, as the worker's Placed is of the
// batches it places (metrics, the red packets' leaderboards).
func (p *Placing) OnPlaced(fn func([]sale.Placement)) { p.placed.Store(&fn) }

// AppendGrabs places gs, or journals them when the database cannot, or has not within
// PlaceWithin. A placement that outlives the wait goes on, and tells of the orders it created.
func (p *Placing) AppendGrabs(ctx context.Context, gs []sale.Grab) error {
	start := time.Now()
	// The placement may outlive this call, and the caller reuses its batch's slice once it
	// returns: the placement has a copy of its own.
	gs = slices.Clone(gs)
	done := make(chan error, 1)
	go func() {
		// Not the caller's context: the placement must learn whether it created the orders,
		// after the gate has stopped waiting for it.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.PlaceAtMost)
		defer cancel()
		ps, err := p.store.PlaceOrders(pctx, gs)
		traceWrite(gs, start, err)
		if err == nil {
			p.tell(ps)
		}
		done <- err
	}()
	wait := time.NewTimer(p.PlaceWithin)
	defer wait.Stop()
	var err error
	select {
	case err = <-done:
		if err == nil {
			return nil
		}
		done = nil // its answer is in
		p.log.Warn("place orders at commit: journaled for the worker instead", "grabs", len(gs), "err", err)
	case <-wait.C:
		p.log.Warn("place orders at commit: not placed within the wait, journaled for the worker", "grabs", len(gs),
			"wait", p.PlaceWithin)
	}
	if jerr := p.journal.AppendGrabs(ctx, gs); jerr != nil {
		if done != nil && <-done == nil {
			return nil // the journal refused, and the placement went through: the batch is orders
		}
		return jerr
	}
	p.queued()
	return nil
}

// tell tells of the placements ps, and logs the grabs the database refused.
func (p *Placing) tell(ps []sale.Placement) {
	for _, pl := range ps {
		if pl.New && pl.Order.Status == sale.StatusFailed {
			p.log.Warn("database refused a grab", "token", pl.Order.Token, "activity", pl.Order.ActivityID,
				"user", pl.Order.UserID, "reason", pl.Order.Reason)
		}
	}
	if fn := p.placed.Load(); fn != nil {
		(*fn)(ps)
	}
}

// tracer makes the placement's spans; a no-op until the process installs a tracer provider.
var tracer = tracing.Tracer("seckill/internal/embedded")

// traceWrite records, in the trace of each traced grab of gs, the database write that placed
// the batch, from start to now.
func traceWrite(gs []sale.Grab, start time.Time, err error) {
	var end time.Time
	for _, g := range gs {
		if g.Trace == "" {
			continue
		}
		if end.IsZero() {
			end = time.Now()
		}
		_, span := tracer.Start(tracing.Continue(context.Background(), g.Trace), "write order",
			trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(start),
			trace.WithAttributes(attribute.String("db.operation.name", "PlaceOrders"), attribute.Int("db.operation.batch.size", len(gs)),
				attribute.String("seckill.grab", g.Token)))
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End(trace.WithTimestamp(end))
	}
}
