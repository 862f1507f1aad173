package metrics_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"seckill/internal/metrics"
	"seckill/internal/sale"
)

// TestMetricsAreServed: what is counted shows in the Prometheus text, with the right values.
func TestMetricsAreServed(t *testing.T) {
	m := metrics.New()
	m.Grab("won", 2*time.Millisecond)
	m.Grab("won", 3*time.Millisecond)
	m.Grab("sold_out_edge", 50*time.Microsecond)
	m.Placed([]sale.Placement{
		{New: true, Order: sale.Order{Status: sale.StatusCreated}},
		{New: true, Order: sale.Order{Status: sale.StatusFailed}},
		{New: false, Order: sale.Order{Status: sale.StatusCreated}}, // a repeated delivery
	})
	m.Order("expired", 4)
	m.Order("dead_lettered", 0)

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	text := string(body)
	for _, want := range []string{
		`seckill_grab_requests_total{outcome="won"} 2`,
		`seckill_grab_requests_total{outcome="sold_out_edge"} 1`,
		`seckill_grab_duration_seconds_count{outcome="won"} 2`,
		`seckill_grab_duration_seconds_bucket{outcome="sold_out_edge",le="0.0001"} 1`,
		`seckill_orders_total{event="created"} 1`,
		`seckill_orders_total{event="failed"} 1`,
		`seckill_orders_total{event="expired"} 4`,
		`seckill_worker_batch_size_count 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(text, `event="dead_lettered"`) {
		t.Error("a count of zero created a series")
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q", ct)
	}
}
