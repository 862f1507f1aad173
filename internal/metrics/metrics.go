// Package metrics counts what a node does at each stage of a sale, for Prometheus: the grab
// requests by outcome (turned away at the edge, by the gate, won) with their latency, the orders
// the worker placed or the database refused, payments, cancellations, expiries and dead letters.
// The node serves it at GET /metrics in the Prometheus text format, on a listener of its own
// (SECKILL_METRICS_ADDR), never on the API's port, which the public reaches.
package metrics

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"seckill/internal/breaker"
	"seckill/internal/risk"
	"seckill/internal/sale"
)

// Metrics holds a node's collectors in a registry of its own (no global state).
type Metrics struct {
	reg      *prometheus.Registry
	grabs    *prometheus.CounterVec
	grabTime *prometheus.HistogramVec
	orders   *prometheus.CounterVec
	relayed  *prometheus.CounterVec
	batch    prometheus.Histogram
	chals    *prometheus.CounterVec
	risks    *prometheus.CounterVec
	scores   *prometheus.HistogramVec
	modelDec *prometheus.CounterVec
	because  *prometheus.CounterVec
	waits    *prometheus.HistogramVec

	reconciles   *prometheus.CounterVec
	drift        *prometheus.GaugeVec
	reconciledAt prometheus.Gauge
	driftMu      sync.Mutex
	drifting     map[string]bool // activities with a drift series

	// outcomes caches each grab outcome's counter and histogram, so the hot path does not hash
	// its label on every request. Outcomes are a small fixed set.
	outcomes sync.Map // outcome -> *outcomeSeries
}

type outcomeSeries struct {
	count   prometheus.Counter
	latency prometheus.Observer
}

// New returns the collectors, registered with the Go runtime's and the process's.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		grabs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_grab_requests_total",
			Help: "Grab requests by outcome: won, joined and already_queued (a queue or lottery line), queue_full, sold_out_edge (the local flag), sold_out (the gate), rate_limited_ip/_user/_node/_activity, blocked_ip/_user, risk_block, risk_challenge, challenge_required, already_bought, not_reserved and wave_not_open (a reservation sale), unauthorized, not_started, ended, busy, invalid, not_found.",
		}, []string{"outcome"}),
		grabTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "seckill_grab_duration_seconds",
			Help:    "Time to answer a grab request, by outcome.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"outcome"}),
		orders: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_orders_total",
			Help: "Order events: created (placed by the worker), failed (refused by the database), paid, payment_failed (the provider took nothing), refund_requested (a payment came after its order was cancelled), refunded, cancelled (by the buyer), expired (payment window closed), dead_lettered; restock_deferred and restock_owed (a cancel whose unit the gate took later), revision_deferred and revision_owed (an operator's change the gate took later).",
		}, []string{"event"}),
		relayed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_events_relayed_total",
			Help: "Attempts to deliver an order event to a webhook receiver, by outcome: delivered, failed (tried again later), parked (given up on until replayed).",
		}, []string{"outcome"}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "seckill_worker_batch_size",
			Help:    "Grabs placed per worker transaction.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10),
		}),
		chals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_challenges_total",
			Help: "Challenge requests by outcome: issued, solved, challenge_failed (a wrong, spent, expired or someone else's answer), and the edge's refusals as for grabs.",
		}, []string{"outcome"}),
		risks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_risk_decisions_total",
			Help: "Requests the risk engine challenged or blocked, by what decided (the rules accounts_per_ip, cadence, solve_time; model, the trained model) and decision.",
		}, []string{"rule", "decision"}),
		scores: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "seckill_risk_model_score",
			Help:    "The trained risk model's scores of grabs (the chance of a bot), by mode: enforce (the model decides) or shadow (it is only counted).",
			Buckets: []float64{.05, .1, .2, .3, .4, .5, .6, .7, .8, .9, .95, .99},
		}, []string{"mode"}),
		modelDec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_risk_model_decisions_total",
			Help: "The trained risk model's decisions on grabs (allow, challenge, block), by mode: enforce, or shadow (what it would have decided; the rules acted).",
		}, []string{"mode", "decision"}),
		because: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_risk_model_top_feature_total",
			Help: "Grabs the trained risk model would challenge or block, by the feature that moved the score most (see docs/operating.md's feature list) and decision.",
		}, []string{"feature", "decision"}),
		waits: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "seckill_line_wait_seconds",
			Help:    "Time a ticket waited in a queue or lottery line, from its join (or the start, for the early crowd) to its admission, by outcome (WON, SOLD_OUT, NOT_DRAWN, ALREADY_BOUGHT, ENDED).",
			Buckets: []float64{.1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800},
		}, []string{"outcome"}),
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_reconcile_checks_total",
			Help: "Scheduled reconciliations of an activity's gate with the database, by outcome: ok, drift (seen twice at rest, reported), repaired, unsettled (grabs moved the gate meanwhile), error.",
		}, []string{"outcome"}),
		drift: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "seckill_reconcile_drift",
			Help: "The gate's remaining units less what the database and the queue say, as the last scheduled reconciliation found it seen twice at rest (0: they agree), per activity that has not ended.",
		}, []string{"activity"}),
		reconciledAt: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_reconcile_last_round_timestamp_seconds",
			Help: "When this node last finished a scheduled reconciliation round (it held the lease), Unix seconds.",
		}),
		drifting: map[string]bool{},
	}
	m.reg.MustRegister(m.grabs, m.grabTime, m.orders, m.relayed, m.batch, m.chals, m.risks, m.scores, m.modelDec, m.because, m.waits, m.reconciles, m.drift, m.reconciledAt,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Watch exports the health of m's node, read from monitor at every scrape: the level
// (seckill_health_level: 0 normal, 1 warning, 2 degraded) and each dependency's breaker state,
// error rate and mean latency over the last 10 s.
func (m *Metrics) Watch(monitor *breaker.Monitor) *Metrics {
	m.reg.MustRegister(healthCollector{monitor})
	return m
}

var (
	levelDesc = prometheus.NewDesc("seckill_health_level",
		"The node's health level: 0 normal, 1 warning (a dependency is slow), 2 degraded (a dependency fails).", nil, nil)
	breakerDesc = prometheus.NewDesc("seckill_breaker_open",
		"A dependency's circuit breaker: 0 closed, 0.5 half-open (probing), 1 open (answering BUSY without calling).", []string{"dependency"}, nil)
	errorRateDesc = prometheus.NewDesc("seckill_dependency_error_rate",
		"A dependency's share of failed calls over the last 10 s.", []string{"dependency"}, nil)
	latencyDesc = prometheus.NewDesc("seckill_dependency_latency_seconds",
		"A dependency's mean call latency over the last 10 s.", []string{"dependency"}, nil)
)

type healthCollector struct{ monitor *breaker.Monitor }

func (c healthCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{levelDesc, breakerDesc, errorRateDesc, latencyDesc} {
		ch <- d
	}
}

func (c healthCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.monitor.Status()
	ch <- prometheus.MustNewConstMetric(levelDesc, prometheus.GaugeValue, float64(st.Level))
	for _, d := range st.Dependencies {
		open := map[string]float64{"closed": 0, "half-open": 0.5, "open": 1}[d.Breaker]
		ch <- prometheus.MustNewConstMetric(breakerDesc, prometheus.GaugeValue, open, d.Name)
		ch <- prometheus.MustNewConstMetric(errorRateDesc, prometheus.GaugeValue, d.ErrorRate, d.Name)
		ch <- prometheus.MustNewConstMetric(latencyDesc, prometheus.GaugeValue, d.MeanMS/1000, d.Name)
	}
}

// WatchLeaderboards exports, at every scrape, the strategy and memory of the leaderboard of
// every red packet usages reports: seckill_leaderboard_bytes{activity,strategy}.
func (m *Metrics) WatchLeaderboards(usages func(ctx context.Context) []sale.BoardUsage) *Metrics {
	m.reg.MustRegister(boardCollector{usages})
	return m
}

var boardDesc = prometheus.NewDesc("seckill_leaderboard_bytes",
	"Memory held by a red packet's leaderboard, by activity and strategy (exact, approximate; database holds none).",
	[]string{"activity", "strategy"}, nil)

type boardCollector struct {
	usages func(ctx context.Context) []sale.BoardUsage
}

func (c boardCollector) Describe(ch chan<- *prometheus.Desc) { ch <- boardDesc }

func (c boardCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, u := range c.usages(ctx) {
		ch <- prometheus.MustNewConstMetric(boardDesc, prometheus.GaugeValue, float64(u.Bytes), u.ActivityID, u.Strategy)
	}
}

// WatchActivities exports, at every scrape, each open activity's units left in the gate
// (seckill_stock_remaining) and grabs still queued for the workers (seckill_queue_depth): the
// numbers behind the backlog and drift alerts.
func (m *Metrics) WatchActivities(gauges func(ctx context.Context) []sale.Gauge) *Metrics {
	m.reg.MustRegister(activityCollector{gauges})
	return m
}

var (
	remainingDesc = prometheus.NewDesc("seckill_stock_remaining",
		"Units (or red-packet shares) an open activity has left in the stock gate.", []string{"activity"}, nil)
	queueDesc = prometheus.NewDesc("seckill_queue_depth",
		"Acknowledged grabs of an open activity not yet placed as orders by a worker.", []string{"activity"}, nil)
	lineWaitingDesc = prometheus.NewDesc("seckill_line_waiting",
		"Tickets in a queue or lottery line not answered yet: the line's length.", []string{"activity"}, nil)
	lineJoinedDesc = prometheus.NewDesc("seckill_line_tickets_total",
		"Tickets ever taken in a queue or lottery line.", []string{"activity"}, nil)
	lineAnsweredDesc = prometheus.NewDesc("seckill_line_answered_total",
		"Tickets of a line admitted to the gate or answered sold out.", []string{"activity"}, nil)
	lineRateDesc = prometheus.NewDesc("seckill_line_drain_rate",
		"Tickets a second the line's drainer admitted, measured over the last seconds.", []string{"activity"}, nil)
	lineWaitDesc = prometheus.NewDesc("seckill_line_wait_estimate_seconds",
		"The estimated wait at the tail of a queue line, at the measured drain rate.", []string{"activity"}, nil)
)

type activityCollector struct {
	gauges func(ctx context.Context) []sale.Gauge
}

func (c activityCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- remainingDesc
	ch <- queueDesc
	ch <- lineWaitingDesc
	ch <- lineJoinedDesc
	ch <- lineAnsweredDesc
	ch <- lineRateDesc
	ch <- lineWaitDesc
}

func (c activityCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, g := range c.gauges(ctx) {
		ch <- prometheus.MustNewConstMetric(remainingDesc, prometheus.GaugeValue, float64(g.Remaining), g.ActivityID)
		ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, float64(g.Queued), g.ActivityID)
		if l := g.Line; l != nil {
			ch <- prometheus.MustNewConstMetric(lineWaitingDesc, prometheus.GaugeValue, float64(l.Waiting), g.ActivityID)
			ch <- prometheus.MustNewConstMetric(lineJoinedDesc, prometheus.CounterValue, float64(l.Joined), g.ActivityID)
			ch <- prometheus.MustNewConstMetric(lineAnsweredDesc, prometheus.CounterValue, float64(l.Answered), g.ActivityID)
			ch <- prometheus.MustNewConstMetric(lineRateDesc, prometheus.GaugeValue, l.DrainRate, g.ActivityID)
			ch <- prometheus.MustNewConstMetric(lineWaitDesc, prometheus.GaugeValue, l.WaitS, g.ActivityID)
		}
	}
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Grab counts one grab request and its latency.
func (m *Metrics) Grab(outcome string, d time.Duration) {
	v, ok := m.outcomes.Load(outcome)
	if !ok {
		v, _ = m.outcomes.LoadOrStore(outcome, &outcomeSeries{m.grabs.WithLabelValues(outcome), m.grabTime.WithLabelValues(outcome)})
	}
	o := v.(*outcomeSeries)
	o.count.Inc()
	o.latency.Observe(d.Seconds())
}

// Admitted records how long a ticket the drainer admitted waited in its line.
func (m *Metrics) Admitted(activityID string, outcome sale.Outcome, waited time.Duration) {
	m.waits.WithLabelValues(string(outcome)).Observe(waited.Seconds())
}

// Challenge counts one challenge request (a question or an answer) by outcome.
func (m *Metrics) Challenge(outcome string) { m.chals.WithLabelValues(outcome).Inc() }

// Risk counts a risk rule's challenge or block.
func (m *Metrics) Risk(v risk.Verdict) {
	if v.Decision != risk.Allow {
		m.risks.WithLabelValues(v.Rule, v.Decision.String()).Inc()
	}
	if !v.Scored {
		return
	}
	mode := "enforce"
	if v.Shadow {
		mode = "shadow"
	}
	m.scores.WithLabelValues(mode).Observe(v.Score)
	m.modelDec.WithLabelValues(mode, v.ModelDecision.String()).Inc()
	if v.ModelDecision != risk.Allow && v.TopN > 0 {
		m.because.WithLabelValues(v.Top[0].Feature, v.ModelDecision.String()).Inc()
	}
}

// WatchRiskModel exports which risk model runs, read from status at every scrape:
// seckill_risk_model_info{version} is 1 for the model in use, and seckill_risk_model_stale is 1
// while the file on disk failed to load (the model before it still runs).
func (m *Metrics) WatchRiskModel(status func() risk.ModelStatus) *Metrics {
	m.reg.MustRegister(modelCollector{status})
	return m
}

var (
	modelInfoDesc = prometheus.NewDesc("seckill_risk_model_info",
		"The trained risk model in use (1), by its version and mode (enforce or shadow).", []string{"version", "mode"}, nil)
	modelStaleDesc = prometheus.NewDesc("seckill_risk_model_stale",
		"1 while the risk model file on disk failed to load: the model in use is the one before it (see /readyz for why).", nil, nil)
)

type modelCollector struct{ status func() risk.ModelStatus }

func (c modelCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- modelInfoDesc
	ch <- modelStaleDesc
}

func (c modelCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.status()
	if st.Version != "" {
		mode := "enforce"
		if st.Shadow {
			mode = "shadow"
		}
		ch <- prometheus.MustNewConstMetric(modelInfoDesc, prometheus.GaugeValue, 1, st.Version, mode)
	}
	stale := 0.0
	if st.Error != "" {
		stale = 1
	}
	ch <- prometheus.MustNewConstMetric(modelStaleDesc, prometheus.GaugeValue, stale)
}

// Order counts an order event ("paid", "payment_failed", "refund_requested", "refunded", "cancelled", "expired", "dead_lettered").
func (m *Metrics) Order(event string, n int) {
	if n > 0 {
		m.orders.WithLabelValues(event).Add(float64(n))
	}
}

// Relayed counts an attempt to deliver an order event: delivered, failed or parked.
func (m *Metrics) Relayed(outcome string) { m.relayed.WithLabelValues(outcome).Inc() }

// Placed counts a batch the worker placed: the orders it created and those the database refused
// (a repeated delivery, already placed, counts nothing).
func (m *Metrics) Placed(ps []sale.Placement) {
	created, failed := 0, 0
	for _, p := range ps {
		switch {
		case !p.New:
		case p.Order.Status == sale.StatusFailed:
			failed++
		default:
			created++
		}
	}
	m.Order("created", created)
	m.Order("failed", failed)
	m.batch.Observe(float64(len(ps)))
}

// Reconciled counts a scheduled reconciliation of an activity and, when it concluded, sets the
// activity's drift.
func (m *Metrics) Reconciled(activityID string, rec sale.Reconciliation, err error) {
	outcome := rec.Outcome
	if err != nil {
		outcome = "error"
	}
	m.reconciles.WithLabelValues(outcome).Inc()
	if err != nil || outcome == sale.ReconcileUnsettled {
		return // nothing concluded: the last drift found stands
	}
	m.driftMu.Lock()
	defer m.driftMu.Unlock()
	m.drift.WithLabelValues(activityID).Set(float64(rec.Drift))
	m.drifting[activityID] = true
}

// ReconcileRound notes the end of a scheduled reconciliation round over checked, at now: the
// drift series of activities no longer checked (ended) are dropped.
func (m *Metrics) ReconcileRound(checked []string, now time.Time) {
	m.reconciledAt.Set(float64(now.UnixMilli()) / 1000)
	keep := make(map[string]bool, len(checked))
	for _, id := range checked {
		keep[id] = true
	}
	m.driftMu.Lock()
	defer m.driftMu.Unlock()
	for id := range m.drifting {
		if !keep[id] {
			m.drift.DeleteLabelValues(id)
			delete(m.drifting, id)
		}
	}
}
