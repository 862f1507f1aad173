package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"seckill/internal/breaker"
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
		Watch(breaker.NewMonitor(breaker.NewGuard("redis", breaker.GateThresholds, time.Now))).
		WatchLeaderboards(func(context.Context) []sale.BoardUsage {
			return []sale.BoardUsage{{ActivityID: "a", Strategy: sale.RankExact, Bytes: 1}}
		}).
		WatchActivities(func(context.Context) []sale.Gauge {
			return []sale.Gauge{{ActivityID: "a"}, {ActivityID: "q", Line: &sale.LineStats{}}}
		}).
		WatchRiskModel(func() risk.ModelStatus { return risk.ModelStatus{} })
	m.Admitted("q", sale.OutcomeWon, time.Second)
	m.Grab("won", time.Millisecond)
	m.Challenge("issued")
	m.Risk(risk.Verdict{Decision: risk.Block, Rule: "cadence"})
	m.Order("paid", 1)
	m.Placed([]sale.Placement{{New: true, Order: sale.Order{Status: sale.StatusCreated}}})
	m.Reconciled("a", sale.Reconciliation{Outcome: sale.ReconcileOK}, nil)
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

// TestReconcileMetrics: a scheduled reconciliation's outcome is counted and its drift set per
// activity; an unsettled one leaves the last drift found; an activity no longer checked (ended)
// loses its series at the end of the round.
func TestReconcileMetrics(t *testing.T) {
	m := metrics.New()
	m.Reconciled("a", sale.Reconciliation{Outcome: sale.ReconcileDrift, Drift: -2}, nil)
	m.Reconciled("b", sale.Reconciliation{Outcome: sale.ReconcileOK}, nil)
	m.Reconciled("a", sale.Reconciliation{Outcome: sale.ReconcileUnsettled, Drift: 5}, nil)
	m.Reconciled("c", sale.Reconciliation{}, errors.New("redis away"))
	m.ReconcileRound([]string{"a", "b", "c"}, time.Unix(1_000_000_000, 0))
	text := scrape(t, m)
	for _, want := range []string{
		`seckill_reconcile_drift{activity="a"} -2`,
		`seckill_reconcile_drift{activity="b"} 0`,
		`seckill_reconcile_checks_total{outcome="drift"} 1`,
		`seckill_reconcile_checks_total{outcome="ok"} 1`,
		`seckill_reconcile_checks_total{outcome="unsettled"} 1`,
		`seckill_reconcile_checks_total{outcome="error"} 1`,
		`seckill_reconcile_last_round_timestamp_seconds 1e+09`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(text, `seckill_reconcile_drift{activity="c"}`) {
		t.Error("a reconciliation that failed set a drift")
	}
	m.ReconcileRound([]string{"b"}, time.Unix(1_000_000_060, 0))
	if text := scrape(t, m); strings.Contains(text, `seckill_reconcile_drift{activity="a"}`) ||
		!strings.Contains(text, `seckill_reconcile_drift{activity="b"} 0`) {
		t.Errorf("after a round without a, its drift series stays or b's went:\n%s", text)
	}
}

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}

// TestAlertRules checks the shipped alerting rules with promtool (Debian's prometheus package,
// which the test command installs): they parse, and each fires on the series of its unit tests
// (docs/grafana/alerts_test.yml) and stays silent on the others. Every alert has a test that
// expects it to fire.
func TestAlertRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is not installed (apt-get install prometheus; make test does): %v", err)
	}
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "../../docs/grafana"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	rules, err := os.ReadFile("../../docs/grafana/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("../../docs/grafana/alerts_test.yml")
	if err != nil {
		t.Fatal(err)
	}
	alerts := regexp.MustCompile(`(?m)^\s*- alert: (\w+)`).FindAllStringSubmatch(string(rules), -1)
	if len(alerts) < 6 {
		t.Fatalf("alerts.yml names %d alerts", len(alerts))
	}
	// A test expecting an alert to fire names it, then lists exp_labels under exp_alerts.
	firing := regexp.MustCompile(`alertname: (\w+)\n\s+exp_alerts:\n\s+- exp_labels`)
	fired := map[string]bool{}
	for _, m := range firing.FindAllStringSubmatch(string(tests), -1) {
		fired[m[1]] = true
	}
	for _, a := range alerts {
		if !fired[a[1]] {
			t.Errorf("alert %s has no test that expects it to fire", a[1])
		}
	}
}

// TestMetricsPassPromtool: the text /metrics serves passes promtool's linter.
func TestMetricsPassPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is not installed (apt-get install prometheus; make test does): %v", err)
	}
	m := metrics.New().WatchActivities(func(context.Context) []sale.Gauge {
		return []sale.Gauge{{ActivityID: "q", Remaining: 1, Line: &sale.LineStats{Joined: 1}}}
	})
	m.Grab("won", time.Millisecond)
	m.Placed([]sale.Placement{{New: true, Order: sale.Order{Status: sale.StatusCreated}}})
	m.Reconciled("q", sale.Reconciliation{Outcome: sale.ReconcileOK}, nil)
	m.ReconcileRound([]string{"q"}, time.Unix(1_000_000_000, 0))
	m.WatchRiskModel(func() risk.ModelStatus { return risk.ModelStatus{Path: "m.json", Version: "v1"} })
	m.Risk(risk.Verdict{Decision: risk.Challenge, Rule: "model", Scored: true, Score: 0.7, ModelDecision: risk.Challenge,
		Top: [3]risk.Contribution{{Feature: "fp_users", LogOdds: 1}}, TopN: 1})
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(scrape(t, m))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

// TestRiskModelMetrics: the model's scores and decisions are counted by mode, a challenge or
// block by the feature that moved it most; which model runs, and whether the file on disk
// failed to load, is read from its status at every scrape.
func TestRiskModelMetrics(t *testing.T) {
	st := risk.ModelStatus{Path: "m.json", Version: "v7"}
	m := metrics.New().WatchRiskModel(func() risk.ModelStatus { return st })
	challenged := risk.Verdict{Decision: risk.Challenge, Rule: "model", Scored: true, Score: 0.7, ModelDecision: risk.Challenge,
		Version: "v7", Top: [3]risk.Contribution{{Feature: "fp_users", LogOdds: 2}}, TopN: 1}
	m.Risk(challenged)
	m.Risk(risk.Verdict{Rule: "model", Scored: true, Score: 0.1, Version: "v7"})
	shadow := challenged
	shadow.Decision, shadow.Rule, shadow.Shadow, shadow.ModelDecision = risk.Allow, "", true, risk.Block
	m.Risk(shadow)
	scrape := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	body := scrape()
	for _, want := range []string{
		`seckill_risk_decisions_total{decision="challenge",rule="model"} 1`,
		`seckill_risk_model_decisions_total{decision="challenge",mode="enforce"} 1`,
		`seckill_risk_model_decisions_total{decision="allow",mode="enforce"} 1`,
		`seckill_risk_model_decisions_total{decision="block",mode="shadow"} 1`,
		`seckill_risk_model_top_feature_total{decision="challenge",feature="fp_users"} 1`,
		`seckill_risk_model_top_feature_total{decision="block",feature="fp_users"} 1`,
		`seckill_risk_model_score_count{mode="enforce"} 2`,
		`seckill_risk_model_score_count{mode="shadow"} 1`,
		`seckill_risk_model_info{mode="enforce",version="v7"} 1`,
		"seckill_risk_model_stale 0",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("no %s in\n%s", want, grepRisk(body))
		}
	}
	if strings.Contains(body, `seckill_risk_decisions_total{decision="allow"`) {
		t.Error("allows counted as risk decisions")
	}
	st.Error = "m.json: risk model: unexpected EOF"
	if body := scrape(); !strings.Contains(body, "seckill_risk_model_stale 1") || !strings.Contains(body, `version="v7"`) {
		t.Errorf("a file that failed to load:\n%s", grepRisk(body))
	}
}

func grepRisk(body string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "seckill_risk") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
