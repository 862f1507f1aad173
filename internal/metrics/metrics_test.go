package metrics_test

import (
	"context"
	"io"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"seckill/internal/health"
	"seckill/internal/metrics"
	"seckill/internal/risk"
	"seckill/internal/sale"
)

// TestMetricsAreServed: what is counted shows in the Prometheus text, with the right values.
func TestMetricsAreServed(t *testing.T) {
	m := metrics.New().WatchActivities(func(context.Context) []sale.Gauge {
		return []sale.Gauge{{ActivityID: "d", Remaining: 3},
			{ActivityID: "q", Remaining: 1, Line: &sale.LineStats{Joined: 70, Waiting: 20, Answered: 50, DrainRate: 12.5, WaitS: 1.6}}}
	})
	m.Admitted("q", sale.OutcomeWon, 3*time.Second)
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
		`seckill_stock_remaining{activity="d"} 3`,
		`seckill_line_waiting{activity="q"} 20`,
		`seckill_line_tickets_total{activity="q"} 70`,
		`seckill_line_answered_total{activity="q"} 50`,
		`seckill_line_drain_rate{activity="q"} 12.5`,
		`seckill_line_wait_estimate_seconds{activity="q"} 1.6`,
		`seckill_line_wait_seconds_bucket{outcome="WON",le="5"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(text, `seckill_line_waiting{activity="d"}`) {
		t.Error("an activity admitted directly has a line")
	}
	if strings.Contains(text, `event="dead_lettered"`) {
		t.Error("a count of zero created a series")
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q", ct)
	}
}

// TestDashboardAndAlertsQueryRealMetrics: every seckill_ metric the Grafana dashboard and the
// alerting rules in docs/grafana name is one this package exports, so a renamed metric cannot
// leave a panel or an alert silently empty.
func TestDashboardAndAlertsQueryRealMetrics(t *testing.T) {
	m := metrics.New().
		Watch(health.NewMonitor(health.NewGuard("redis", health.GateThresholds, time.Now))).
		WatchLeaderboards(func(context.Context) []sale.BoardUsage {
			return []sale.BoardUsage{{ActivityID: "a", Strategy: sale.RankExact, Bytes: 1}}
		}).
		WatchActivities(func(context.Context) []sale.Gauge {
			return []sale.Gauge{{ActivityID: "a"}, {ActivityID: "q", Line: &sale.LineStats{}}}
		})
	m.Admitted("q", sale.OutcomeWon, time.Second)
	m.Grab("won", time.Millisecond)
	m.Challenge("issued")
	m.Risk(risk.Verdict{Decision: risk.Block, Rule: "cadence"})
	m.Order("paid", 1)
	m.Placed([]sale.Placement{{New: true, Order: sale.Order{Status: sale.StatusCreated}}})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	exported := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			exported[strings.Fields(name)[0]] = true
		}
	}
	name := regexp.MustCompile(`seckill_[a-z_]+`)
	for _, file := range []string{"../../docs/grafana/seckill.json", "../../docs/grafana/alerts.yml"} {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		used := name.FindAllString(string(text), -1)
		if len(used) < 5 {
			t.Fatalf("%s names only %v", file, used)
		}
		for _, n := range used {
			base := n
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(n, suffix); ok && exported[b] {
					base = b
				}
			}
			if !exported[base] {
				t.Errorf("%s queries %s, which is not exported", file, n)
			}
		}
	}
}
