// Package metrics counts what a node does at each stage of a sale, for Prometheus: the grab
// requests by outcome (turned away at the edge, by the gate, won) with their latency, the orders
// the worker placed or the database refused, payments, cancellations, expiries and dead letters.
// It is served at GET /metrics in the Prometheus text format.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"seckill/internal/sale"
)

// Metrics holds a node's collectors in a registry of its own (no global state).
type Metrics struct {
	reg      *prometheus.Registry
	grabs    *prometheus.CounterVec
	grabTime *prometheus.HistogramVec
	orders   *prometheus.CounterVec
	batch    prometheus.Histogram
}

// New returns the collectors, registered with the Go runtime's and the process's.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		grabs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_grab_requests_total",
			Help: "Grab requests by outcome: won, sold_out_edge (the local flag), sold_out (the gate), rate_limited_ip/_user/_activity, blocked_ip/_user, already_bought, unauthorized, not_started, ended, busy, invalid, not_found.",
		}, []string{"outcome"}),
		grabTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "seckill_grab_duration_seconds",
			Help:    "Time to answer a grab request, by outcome.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"outcome"}),
		orders: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_orders_total",
			Help: "Order events: created (placed by the worker), failed (refused by the database), paid, cancelled (by the buyer), expired (payment window closed), dead_lettered.",
		}, []string{"event"}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "seckill_worker_batch_size",
			Help:    "Grabs placed per worker transaction.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10),
		}),
	}
	m.reg.MustRegister(m.grabs, m.grabTime, m.orders, m.batch,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Grab counts one grab request and its latency.
func (m *Metrics) Grab(outcome string, d time.Duration) {
	m.grabs.WithLabelValues(outcome).Inc()
	m.grabTime.WithLabelValues(outcome).Observe(d.Seconds())
}

// Order counts an order event ("paid", "cancelled", "expired", "dead_lettered").
func (m *Metrics) Order(event string, n int) {
	if n > 0 {
		m.orders.WithLabelValues(event).Add(float64(n))
	}
}

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
