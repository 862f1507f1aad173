package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Traces are off unless the standard OpenTelemetry variables ask for them: OTEL_TRACES_EXPORTER
// set to otlp, or an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). The SDK reads the rest itself from the process's
// environment: the endpoint, headers and timeout, OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES, the sampler (OTEL_TRACES_SAMPLER, default parent-based always-on)
// and the batching (OTEL_BSP_*). Spans go out over OTLP/HTTP (protobuf, port 4318).

// tracingOf says whether getenv asks for traces, and refuses what the node cannot do.
func tracingOf(getenv func(string) string) (bool, error) {
	switch e := getenv("OTEL_TRACES_EXPORTER"); e {
	case "none":
		return false, nil
	case "", "otlp":
		if e == "" && getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return false, nil
		}
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: want otlp or none", e)
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := getenv(k); p != "" {
			if p != "http/protobuf" {
				return false, fmt.Errorf("%s=%q: this node sends OTLP over HTTP only, want http/protobuf", k, p)
			}
			break
		}
	}
	return true, nil
}

// startTracing installs the process's tracer provider, exporting over OTLP/HTTP, and the W3C
// propagators. stop flushes what is left and puts the no-op provider back.
func startTracing(ctx context.Context) (stop func(context.Context) error, err error) {
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("traces: %w", err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(semconv.ServiceName("seckill")), resource.WithFromEnv(),
		resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("traces: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return func(ctx context.Context) error {
		defer otel.SetTracerProvider(noop.NewTracerProvider())
		return tp.Shutdown(ctx)
	}, nil
}

// traced is h with a server span per request, named by its route ("POST
// /api/activities/{id}/grab"), continuing the caller's trace when its traceparent says so.
func traced(h http.Handler) http.Handler {
	return otelhttp.NewHandler(h, "seckill", otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
		if r.Pattern != "" {
			return r.Pattern
		}
		return r.Method
	}))
}

// traceIDs is a log handler that adds the trace and span ids of the record's context, when it
// carries a span: a log line and its trace find each other.
type traceIDs struct{ slog.Handler }

func (h traceIDs) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceIDs) WithAttrs(as []slog.Attr) slog.Handler { return traceIDs{h.Handler.WithAttrs(as)} }
func (h traceIDs) WithGroup(name string) slog.Handler    { return traceIDs{h.Handler.WithGroup(name)} }
