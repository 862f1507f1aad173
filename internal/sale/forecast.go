package sale

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"
)

// The crowd forecast (AI预测与资源调度, in its plainest honest form): a reservation sale knows
// before its start how many reserved, and the shop's past reservation sales say how such a
// crowd behaves: how many of the reservers come (buyers per reservation), how often each clicks
// (clicks per buyer) and how the clicks bunch up (the peak factor: the busiest second over a
// wave's mean share of the clicks)// of its wave's). From the three and the reservations, Forecasts.Forecast predicts the buyers,
// the clicks and the peak's requests a second, which capacity planning (seckill plan) sizes the
// fleet for before the crowd comes.
//
// What a sale's crowd did is measured where it happens: every node counts the grab requests of
// a reservation sale per second from its start, whoever made them (the load the fleet takes:
// strangers' refusals and the sold-out answers too), and the users they named, and adds them to
// the database every few seconds (Record, Flush). When the sale is archived its history is kept
// (Keep): the reservers, the buyers (those named), the clicks, the busiest second, and per wave
// the spread of its requests over the seconds after its opening.

// SaleHistory is what the crowd of one archived reservation sale did.
type SaleHistory struct {
	ActivityID   string
	ArchivedAt   time.Time
	Reserved     int64 // reservations at the close
	Buyers       int64 // reservers named by a grab request
	Clicks       int64 // the grab requests from the start to the end, whoever made them
	Waves        int64
	WaveInterval time.Duration
	// PeakRPS is the busiest second's requests; PeakFactor the busiest second over the mean
	// requests of a wave (Clicks / Waves): how much of a wave's share of the clicks lands in one
	// second, where a wave's own clicks, the early ones of the next and the strangers' crowd it.
	PeakRPS    int64
	PeakFactor float64
	// Spread is, over the waves with requests, the mean share of a wave's requests in each of the
	// SpreadSeconds seconds after its opening.
	Spread []float64
}

// SpreadSeconds is how many seconds after a wave's opening a SaleHistory's Spread follows.
const SpreadSeconds = 10

// CrowdModel is how a reservation sale's crowd behaves: fitted from the shop's history, or the
// prior.
type CrowdModel struct {
	BuyersPerReservation float64
	ClicksPerBuyer       float64
	PeakFactor           float64
	// Sales are the past sales fitted from (0: the prior).
	Sales int
}

// Prior is the model before a shop has MinHistory sales to fit from: most reservers come (four
// in five), each clicks three times (the click, an impatient one, one after a refusal), and a
// third of a wave's share of the clicks lands in its busiest second (a wave is a burst: the
// page's countdown ends for everyone at once).
var Prior = CrowdModel{BuyersPerReservation: 0.8, ClicksPerBuyer: 3, PeakFactor: 0.35}

// MinHistory is how many past reservation sales with a crowd the forecast needs before it fits
// from them rather than from Prior; HistoryFitted the most recent ones it fits from.
const (
	MinHistory    = 3
	HistoryFitted = 20
)

// The bases of a forecast.
const (
	BasisHistory = "history"
	BasisPrior   = "prior"
)

// Forecast is a reservation sale's expected crowd.
type Forecast struct {
	Activity Activity
	Reserved int64
	// ExpectedBuyers of the reservers click, ExpectedClicks times in all; the busiest second
	// takes ExpectedPeakRPS requests, a wave's mean share of the clicks times the peak factor.
	ExpectedBuyers  int64
	ExpectedClicks  int64
	ExpectedPeakRPS float64
	Basis           string // BasisHistory or BasisPrior
	Model           CrowdModel
}

// Fit is the model of history (newest first): Prior below MinHistory sales with a crowd, else
// the pooled rates of the latest HistoryFitted (buyers over reservations, clicks over buyers)
// and their mean peak factor.
func Fit(history []SaleHistory) CrowdModel {
	var use []SaleHistory
	for _, h := range history {
		if h.Reserved > 0 && h.Buyers > 0 && h.Clicks > 0 && len(use) < HistoryFitted {
			use = append(use, h)
		}
	}
	if len(use) < MinHistory {
		return Prior
	}
	var reserved, buyers, clicks int64
	var factor float64
	for _, h := range use {
		reserved, buyers, clicks, factor = reserved+h.Reserved, buyers+h.Buyers, clicks+h.Clicks, factor+h.PeakFactor
	}
	return CrowdModel{BuyersPerReservation: float64(buyers) / float64(reserved), ClicksPerBuyer: float64(clicks) / float64(buyers),
		PeakFactor: factor / float64(len(use)), Sales: len(use)}
}

// Predict is the forecast of m for a, reserved by n.
func (m CrowdModel) Predict(a Activity, n int64) Forecast {
	f := Forecast{Activity: a, Reserved: n, Basis: BasisPrior, Model: m}
	if m.Sales > 0 {
		f.Basis = BasisHistory
	}
	buyers := float64(n) * m.BuyersPerReservation
	clicks := buyers * m.ClicksPerBuyer
	f.ExpectedBuyers, f.ExpectedClicks = int64(math.Round(buyers)), int64(math.Round(clicks))
	f.ExpectedPeakRPS = math.Round(clicks/float64(max(a.Waves, 1))*m.PeakFactor*10) / 10
	return f
}

// ForecastStore keeps what the forecasts are made from: the reservation sales' arrivals while
// they run, and the history of those archived.
type ForecastStore interface {
	// AddArrivals adds to activity's arrivals the requests counted per second (Unix seconds),
	// and marks the reservations of users as clicked (users who did not reserve are left out).
	AddArrivals(ctx context.Context, activityID string, perSecond map[int64]int64, users []string) error

	// Arrivals returns activity's requests per second (Unix seconds) and how many of its
	// reservations clicked.
	Arrivals(ctx context.Context, activityID string) (perSecond map[int64]int64, clicked int64, err error)

	// KeepHistory records h, once: a second call for the same activity keeps the first; and
	// deletes the activity's arrivals.
	KeepHistory(ctx context.Context, h SaleHistory) error

	// History returns the latest limit sales' histories, newest first.
	History(ctx context.Context, limit int) ([]SaleHistory, error)
}

// Forecasts are the reservation sales' crowd forecasts: a feature on the ForecastStore, beside
// the core service (the activities) and the reservations (their counts).
type Forecasts struct {
	core     *Service
	store    ForecastStore
	reserved ReservationStore

	mu      sync.Mutex
	pending map[string]*arrivals // activity id -> counted since the last Flush
}

// arrivals are one activity's requests per second and the users who made them, since the last
// Flush.
type arrivals struct {
	perSecond map[int64]int64
	users     map[string]struct{}
}

// MaxUsersPerFlush bounds the users an activity's arrivals remember between two flushes; beyond,
// their requests are counted and the users not marked (a forecast's buyers come out low, never
// a node's memory high).
const MaxUsersPerFlush = 200_000

// NewForecasts returns the forecasts of core's reservation sales, kept by store, their
// reservations counted by reserved. It keeps a sale's history when the core service archives it.
func NewForecasts(core *Service, store ForecastStore, reserved ReservationStore) *Forecasts {
	f := &Forecasts{core: core, store: store, reserved: reserved, pending: map[string]*arrivals{}}
	core.beforeArchive(f.Keep)
	return f
}

// Record counts a grab request at at for a, the activity as the node knows it, if it is a
// reservation sale that has started and not ended, and userID ("" for none known) as having made
// one.
func (f *Forecasts) Record(a Activity, userID string, at time.Time) {
	if a.Admission != AdmitReservation || at.Before(a.StartAt) || !at.Before(a.EndAt) {
		return
	}
	id := a.ID
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.pending[id]
	if p == nil {
		p = &arrivals{perSecond: map[int64]int64{}, users: map[string]struct{}{}}
		f.pending[id] = p
	}
	p.perSecond[at.Unix()]++
	if userID != "" && len(p.users) < MaxUsersPerFlush {
		p.users[userID] = struct{}{}
	}
}

// Flush adds what Record counted to the store, and returns for how many activities. What a store
// refused is counted again with the next.
func (f *Forecasts) Flush(ctx context.Context) (int, error) {
	f.mu.Lock()
	pending := f.pending
	f.pending = map[string]*arrivals{}
	f.mu.Unlock()
	var errs []error
	n := 0
	for _, id := range slices.Sorted(maps.Keys(pending)) {
		p := pending[id]
		if err := f.store.AddArrivals(ctx, id, p.perSecond, slices.Sorted(maps.Keys(p.users))); err != nil {
			errs = append(errs, fmt.Errorf("the arrivals of %s: %w", id, err))
			f.mu.Lock()
			f.merge(id, p)
			f.mu.Unlock()
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// merge adds p back to id's pending arrivals (f.mu held).
func (f *Forecasts) merge(id string, p *arrivals) {
	q := f.pending[id]
	if q == nil {
		f.pending[id] = p
		return
	}
	for s, c := range p.perSecond {
		q.perSecond[s] += c
	}
	for u := range p.users {
		if len(q.users) < MaxUsersPerFlush {
			q.users[u] = struct{}{}
		}
	}
}

// Keep keeps the history of a, a reservation sale being archived (see SaleHistory); any other
// activity has none. The core service calls it before it archives an activity.
func (f *Forecasts) Keep(ctx context.Context, a Activity) error {
	if a.Admission != AdmitReservation {
		return nil
	}
	n, err := f.reserved.Reserved(ctx, a.ID)
	if err != nil {
		return err
	}
	perSecond, clicked, err := f.store.Arrivals(ctx, a.ID)
	if err != nil {
		return err
	}
	return f.store.KeepHistory(ctx, HistoryOf(a, n, clicked, perSecond, f.core.now()))
}

// HistoryOf is the history of reservation sale a, archived at at, reserved by n of whom clicked
// clicked, who made perSecond requests (Unix seconds). Each second from the start belongs to the
// last wave opened by it (for the spread).
func HistoryOf(a Activity, n, clicked int64, perSecond map[int64]int64, at time.Time) SaleHistory {
	waves := max(a.Waves, 1)
	h := SaleHistory{ActivityID: a.ID, ArchivedAt: at, Reserved: n, Buyers: clicked, Waves: waves, WaveInterval: a.WaveInterval,
		Spread: make([]float64, SpreadSeconds)}
	per := make([]int64, waves)     // requests per wave
	early := make([][]int64, waves) // the first SpreadSeconds seconds', per wave
	start, end := a.StartAt.Unix(), a.EndAt.Unix()
	for s, c := range perSecond {
		if s < start || s >= end {
			continue
		}
		k := int64(0) // the wave, from 0
		for k+1 < waves && s >= a.WaveOpens(k+2).Unix() {
			k++
		}
		h.Clicks += c
		h.PeakRPS = max(h.PeakRPS, c)
		per[k] += c
		if off := s - a.WaveOpens(k+1).Unix(); off < SpreadSeconds {
			if early[k] == nil {
				early[k] = make([]int64, SpreadSeconds)
			}
			early[k][off] += c
		}
	}
	counted := 0
	for k := range waves {
		if per[k] == 0 {
			continue
		}
		counted++
		for i, c := range early[k] {
			h.Spread[i] += float64(c) / float64(per[k])
		}
	}
	for i := range h.Spread {
		if counted > 0 {
			h.Spread[i] /= float64(counted)
		}
	}
	if h.Clicks > 0 {
		h.PeakFactor = float64(h.PeakRPS) * float64(waves) / float64(h.Clicks)
	}
	return h
}

// Forecast is activity id's forecast: its reservations so far (all of them once they close) and
// the model fitted from the shop's history. Errors: ErrNotFound, ErrNotReservable, ErrBusy.
func (f *Forecasts) Forecast(ctx context.Context, id string) (Forecast, []SaleHistory, error) {
	a, err := f.core.Activity(ctx, id)
	if err != nil {
		return Forecast{}, nil, err
	}
	if a.Admission != AdmitReservation {
		return Forecast{}, nil, fmt.Errorf("activity %s: %w", id, ErrNotReservable)
	}
	n, err := f.reserved.Reserved(ctx, id)
	if err != nil {
		return Forecast{}, nil, err
	}
	history, err := f.store.History(ctx, HistoryFitted)
	if err != nil {
		return Forecast{}, nil, err
	}
	history = slices.DeleteFunc(history, func(h SaleHistory) bool { return h.ActivityID == id })
	return Fit(history).Predict(a, n), history, nil
}
