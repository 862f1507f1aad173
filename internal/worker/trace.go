package worker

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"seckill/internal/sale"
	"seckill/internal/tracing"
)

// tracer makes the worker's spans; a no-op until the process installs a tracer provider.
var tracer = tracing.Tracer("seckill/internal/worker")

// followed are the traces of a batch's traced grabs, continued in the worker: for each, a
// "process grab" span from the read of its stream entry to its acknowledgement, child of the
// span that published it (sale.Grab.Trace), and under it the "write order" of its batch.
type followed []followedGrab

type followedGrab struct {
	ctx  context.Context
	span trace.Span
}

// follow starts the spans of ds's traced grabs. A batch of untraced grabs costs nothing.
func follow(ds []sale.Delivery) followed {
	var f followed
	for _, d := range ds {
		g := d.Grab
		if g.Trace == "" {
			continue
		}
		ctx, span := tracer.Start(tracing.Continue(context.Background(), g.Trace), "process grab",
			trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(attribute.String("messaging.operation.type", "process"), attribute.String("seckill.grab", g.Token),
				attribute.String("seckill.activity", g.ActivityID), attribute.Int64("seckill.queue_wait_ms", time.Since(g.At).Milliseconds()),
				attribute.Int("seckill.delivery", d.Attempts)))
		f = append(f, followedGrab{ctx: ctx, span: span})
	}
	return f
}

// wrote records the database write of the batch, from start to now, in each trace: one write
// of n grabs places them all.
func (f followed) wrote(start time.Time, n int, err error) {
	if len(f) == 0 {
		return
	}
	end := time.Now()
	for _, g := range f {
		_, span := tracer.Start(g.ctx, "write order", trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(start),
			trace.WithAttributes(attribute.String("db.operation.name", "PlaceOrders"), attribute.Int("db.operation.batch.size", n)))
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End(trace.WithTimestamp(end))
	}
}

// end ends the grabs' spans.
func (f followed) end() {
	for _, g := range f {
		g.span.End()
	}
}
