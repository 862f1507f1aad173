package tracing

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestParentContinues: a span's parent, carried as text, makes the span started from it a child
// in the same trace; no span, no parent; garbage continues nothing.
func TestParentContinues(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, publish := tp.Tracer("t").Start(context.Background(), "publish")
	parent := Parent(ctx)
	publish.End()
	if len(parent) != 55 {
		t.Fatalf("Parent = %q, want a W3C traceparent", parent)
	}
	_, process := tp.Tracer("t").Start(Continue(context.Background(), parent), "process")
	process.End()
	spans := rec.Ended()
	if len(spans) != 2 || spans[1].Parent().SpanID() != spans[0].SpanContext().SpanID() ||
		spans[1].SpanContext().TraceID() != spans[0].SpanContext().TraceID() || !spans[1].Parent().IsRemote() {
		t.Fatalf("the continued span is not the publisher's remote child: %+v", spans)
	}
	if p := Parent(context.Background()); p != "" {
		t.Fatalf("Parent without a span = %q", p)
	}
	for _, bad := range []string{"", "not a traceparent", "00-" + string(make([]byte, 200))} {
		if sc := trace.SpanContextFromContext(Continue(context.Background(), bad)); sc.IsValid() {
			t.Fatalf("Continue(%q) made %v", bad, sc)
		}
	}
}

// TestTracerFollowsTheProvider: a package's tracer, taken before any provider is installed,
// records to the provider of the moment, the second one too.
func TestTracerFollowsTheProvider(t *testing.T) {
	tr := Tracer("seckill/test")
	for i := range 2 {
		rec := tracetest.NewSpanRecorder()
		otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
		_, s := tr.Start(context.Background(), "a span")
		s.End()
		if n := len(rec.Ended()); n != 1 {
			t.Fatalf("provider %d recorded %d spans, want 1", i+1, n)
		}
	}
}
