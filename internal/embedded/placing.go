package embedded

import (
	"context"
	"log/slog"
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
// it. A placement cut short is rolled back, or was committed after all: the worker's placing of
// the journaled batch then finds the orders by their tokens. Either way the batch is durable
// before the gate answers.
type Placing struct {
	// PlaceWithin bounds a batch's placement before it goes to the journal instead.
	PlaceWithin time.Duration

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
	return &Placing{PlaceWithin: placeWithin, store: store, journal: journal, queued: queued, log: log}
}

// placeWithin is Placing's default bound: a batch of 256 orders takes 4–5 ms on SQLite here, and
// up to 25 ms beside a crowd on the same two cores (docs/BENCHMARKS.md §10).
const placeWithin = 250 * time.Millisecond

// OnPlaced sets what is told of every batch placed here, as the worker's Placed is of the
// batches it places (metrics, the red packets' leaderboards).
func (p *Placing) OnPlaced(fn func([]sale.Placement)) { p.placed.Store(&fn) }

// AppendGrabs places gs, or journals them when the database cannot.
func (p *Placing) AppendGrabs(ctx context.Context, gs []sale.Grab) error {
	start := time.Now()
	// Given up, not timed out: a cancel is the caller's, which the database's breaker does not
	// count against it (a busy writer is not a failing database).
	pctx, cancel := context.WithCancel(ctx)
	stop := time.AfterFunc(p.PlaceWithin, cancel)
	ps, err := p.store.PlaceOrders(pctx, gs)
	stop.Stop()
	cancel()
	traceWrite(gs, start, err)
	if err != nil {
		p.log.Warn("place orders at commit: journaled for the worker instead", "grabs", len(gs), "err", err)
		if err := p.journal.AppendGrabs(ctx, gs); err != nil {
			return err
		}
		p.queued()
		return nil
	}
	for _, pl := range ps {
		if pl.New && pl.Order.Status == sale.StatusFailed {
			p.log.Warn("database refused a grab", "token", pl.Order.Token, "activity", pl.Order.ActivityID,
				"user", pl.Order.UserID, "reason", pl.Order.Reason)
		}
	}
	if fn := p.placed.Load(); fn != nil {
		(*fn)(ps)
	}
	return nil
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
