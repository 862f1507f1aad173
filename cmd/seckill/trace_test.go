package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"seckill/internal/redistest"
)

// collector is an OTLP/HTTP trace receiver on loopback: it keeps the spans nodes send it.
type collector struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []span
}

// span is what the tests read of an exported span.
type span struct {
	name, trace, id, parent string
	service                 string
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &req)
		}
		if r.URL.Path != "/v1/traces" || err != nil {
			t.Errorf("collector: %s %s: %v", r.Method, r.URL.Path, err)
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rs := range req.ResourceSpans {
			service := ""
			for _, a := range rs.GetResource().GetAttributes() {
				if a.Key == "service.name" {
					service = a.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					c.spans = append(c.spans, span{name: s.Name, trace: hex.EncodeToString(s.TraceId), id: hex.EncodeToString(s.SpanId),
						parent: hex.EncodeToString(s.ParentSpanId), service: service})
				}
			}
		}
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Write(b)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// trace returns the spans of the trace whose span is named root, by name.
func (c *collector) trace(root string) map[string]span {
	c.mu.Lock()
	defer c.mu.Unlock()
	var id string
	for _, s := range c.spans {
		if s.name == root {
			id = s.trace
		}
	}
	out := map[string]span{}
	for _, s := range c.spans {
		if id != "" && s.trace == id {
			out[s.name] = s
		}
	}
	return out
}

// lockedBuffer is a log both run and the test touch.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestTraceFollowsAGrab: with an OTLP endpoint set, one trace follows a grab from the click to
// its order. On Redis, across the stream: the request's span, the gate call, the stream entry's
// publishing, the worker's placement and the database write, each the child of the one before.
// Embedded, where the gate's commit places the order: the request's span and the write. The
// request's log line carries the trace's id.
func TestTraceFollowsAGrab(t *testing.T) {
	t.Run("Redis", func(t *testing.T) {
		srv := redistest.Start(t, redistest.Options{})
		traceOneGrab(t, []string{"SECKILL_REDIS", srv.URL()},
			"POST /api/activities/{id}/grab", "gate grab", "publish grab", "process grab", "write order")
	})
	t.Run("Embedded", func(t *testing.T) {
		traceOneGrab(t, nil, "POST /api/activities/{id}/grab", "write order")
	})
}

// traceOneGrab serves with more settings and tracing to a collector of its own, grabs a unit,
// and checks that the grab's trace is chain, each span the child of the one before.
func traceOneGrab(t *testing.T, more []string, chain ...string) {
	col := newCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.srv.URL) // the SDK reads the process's own
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	t.Setenv("OTEL_SERVICE_NAME", "seckill-test")
	env := testEnv(sqliteDSN(t), append(more, "SECKILL_LOG_LEVEL", "debug", "OTEL_EXPORTER_OTLP_ENDPOINT", col.srv.URL)...)
	logs := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	base, done := launchLogging(t, ctx, env, logs)
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	c := newClient(t, base)
	id := c.CreateItem(5, 1, time.Minute)
	m := c.Must("POST", "/api/activities/"+id+"/grab", c.Token("alice"), "", http.StatusAccepted)
	if st := c.Drained(id); st["orders"] != 1.0 {
		t.Fatalf("one grab, stats %v", st)
	}
	if o := c.Must("GET", "/api/orders/"+m["order_token"].(string), c.Token("alice"), "", http.StatusOK); o["status"] != "CREATED" {
		t.Fatalf("alice's order: %v", o)
	}

	var tr map[string]span
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if tr = col.trace(chain[0]); len(tr) >= len(chain) && tr["write order"].id != "" || time.Now().After(deadline) {
			break
		}
	}
	for i, name := range chain {
		s, ok := tr[name]
		switch {
		case !ok:
			t.Fatalf("the grab's trace has no %q span: %v (all: %v)", name, tr, col.spans)
		case s.service != "seckill-test":
			t.Errorf("span %q of service %q, want OTEL_SERVICE_NAME's", name, s.service)
		case i > 0 && s.parent != tr[chain[i-1]].id:
			t.Errorf("span %q is the child of %s, want of %q (%s)", name, s.parent, chain[i-1], tr[chain[i-1]].id)
		}
	}
	if want := "trace_id=" + tr[chain[0]].trace; !strings.Contains(logs.String(), want) {
		t.Errorf("no log line carries %s:\n%s", want, logs.String())
	}
}

// TestTracingSettings: traces are off unless the OTEL_* variables ask for them, and what the
// node cannot do is refused with a clear error.
func TestTracingSettings(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		on   bool
		fail string
	}{
		{nil, false, ""},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"}, true, ""},
		{[]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces"}, true, ""},
		{[]string{"OTEL_TRACES_EXPORTER", "otlp"}, true, ""},
		{[]string{"OTEL_TRACES_EXPORTER", "none", "OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"}, false, ""},
		{[]string{"OTEL_TRACES_EXPORTER", "zipkin"}, false, "want otlp or none"},
		{[]string{"OTEL_TRACES_EXPORTER", "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}, false, "OTLP over HTTP only"},
		{[]string{"OTEL_TRACES_EXPORTER", "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}, true, ""},
	} {
		c, err := parseServe(nil, testEnv("sqlite:x", tc.env...), io.Discard)
		switch {
		case tc.fail != "" && (err == nil || !strings.Contains(err.Error(), tc.fail)):
			t.Errorf("%v: %v, want an error saying %q", tc.env, err, tc.fail)
		case tc.fail == "" && err != nil:
			t.Errorf("%v: %v", tc.env, err)
		case tc.fail == "" && c.tracing != tc.on:
			t.Errorf("%v: tracing %v, want %v", tc.env, c.tracing, tc.on)
		}
	}
}
