// Package tracing carries a grab's trace from the node that took it to the worker that writes
// its order: the W3C traceparent of the span that published the grab, kept in its stream entry,
// and the context that continues that trace where the entry is read. Spans are made with the
// OpenTelemetry API against the global provider, which is a no-op until cmd/seckill installs
// one (OTEL_* variables): then every call here is cheap, and Parent is "".
package tracing

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// w3c is the format of the parents kept in stream entries, whatever the process propagates.
var w3c propagation.TraceContext

// MaxParent bounds a traceparent read from a stream entry (version 00 is 55 bytes).
const MaxParent = 128

// Parent is the W3C traceparent of ctx's span, "" when ctx carries none.
func Parent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	w3c.Inject(ctx, c)
	return c["traceparent"]
}

// Continue is ctx continuing the trace of parent, a traceparent that Parent made (in another
// process, maybe); ctx as it is when parent is empty or not one.
func Continue(ctx context.Context, parent string) context.Context {
	if parent == "" || len(parent) > MaxParent {
		return ctx
	}
	return w3c.Extract(ctx, propagation.MapCarrier{"traceparent": parent})
}

// Tracer is the tracer of the package named pkg, taken from the process's provider at each span:
// a provider installed after the package took its tracer, or replaced (a process that serves
// more than once, as bench and the tests do), is the one used. otel.Tracer's tracers follow
// only the first provider ever installed.
func Tracer(pkg string) trace.Tracer { return current{pkg: pkg} }

type current struct {
	embedded.Tracer
	pkg string
}

func (c current) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return otel.GetTracerProvider().Tracer(c.pkg).Start(ctx, name, opts...)
}
