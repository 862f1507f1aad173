package httpapi

import (
	"encoding/csv"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"seckill/internal/httpapi/wire"
	"seckill/internal/sale"
)

// reserve reserves a reservation sale for the caller: 201 the first time, 200 with the same
// reservation after. It passes the edge a grab passes (blocks, rate limits), the sold-out flag
// aside: a reservation takes no unit.
func (s *Server) reserve(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	c, _, err := s.edge(w, r, id, true, false)
	if err == nil {
		err = decodeEmpty(w, r, &struct{}{})
	}
	var res sale.Reservation
	var created bool
	if err == nil {
		res, created, err = s.reservations.Reserve(r.Context(), id, c.user)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	s.writeReservation(w, r, status, res)
}

// myReservation answers the caller's reservation of a reservation sale, or 404 NOT_RESERVED.
func (s *Server) myReservation(w http.ResponseWriter, r *http.Request, user string) {
	res, err := s.reservations.Mine(r.Context(), r.PathValue("id"), user)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeReservation(w, r, http.StatusOK, res)
}

// writeReservation answers res, with its wave's opening once it has a wave.
func (s *Server) writeReservation(w http.ResponseWriter, r *http.Request, status int, res sale.Reservation) {
	v := wire.ReservationResponse{ActivityID: res.ActivityID, UserID: res.UserID, Number: res.Number, ReservedAt: res.ReservedAt}
	if res.Wave > 0 {
		a, err := s.svc.Activity(r.Context(), res.ActivityID)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		opens := a.WaveOpens(res.Wave)
		v.Wave, v.OpensAt = &res.Wave, &opens
	}
	writeJSON(w, status, v)
}

// exportReservations streams a reservation sale's reservations as CSV, by number: user, number,
// wave (0 before the close), reserved_at.
func (s *Server) exportReservations(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	a, err := s.svc.Activity(r.Context(), id)
	if err == nil && a.Admission != sale.AdmitReservation {
		err = sale.ErrNotReservable
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="reservations-`+id+`.csv"`)
	cw := csv.NewWriter(w)
	cw.Write([]string{"user", "number", "wave", "reserved_at"})
	err = s.reservations.Each(r.Context(), id, func(res sale.Reservation) error {
		cw.Write([]string{csvSafe(res.UserID), strconv.FormatInt(res.Number, 10), strconv.FormatInt(res.Wave, 10),
			res.ReservedAt.UTC().Format(time.RFC3339Nano)})
		return cw.Error()
	})
	cw.Flush()
	if err != nil {
		s.log.WarnContext(r.Context(), "reservation export cut short", "activity", id, "err", err, "request_id", requestID(w))
	}
}

// planTerms reads a forecast's plan terms from its query, each left out its default. Errors:
// sale.ErrInvalid for one that is not a number (or a duration); the planner bounds them.
func planTerms(q url.Values, minReplicas int) (PlanTerms, error) {
	t := PlanTerms{Cores: 8, Headroom: 0.6, Drain: time.Minute, MinReplicas: minReplicas}
	var err error
	for name, parse := range map[string]func(string) error{
		"cores":        func(v string) (err error) { t.Cores, err = strconv.Atoi(v); return err },
		"headroom":     func(v string) (err error) { t.Headroom, err = strconv.ParseFloat(v, 64); return err },
		"drain":        func(v string) (err error) { t.Drain, err = time.ParseDuration(v); return err },
		"min_replicas": func(v string) (err error) { t.MinReplicas, err = strconv.Atoi(v); return err },
	} {
		if v := q.Get(name); v != "" && parse(v) != nil {
			err = fmt.Errorf("%w: %s=%q: want a number (drain: a duration such as 90s)", sale.ErrInvalid, name, v)
		}
	}
	return t, err
}

// PlanTerms are what a forecast's plan is sized with besides the forecast: a node's cores, the
// share of them to use at the peak, how long the workers may take after the sell-out, and the
// replicas that acknowledge each grab (see capacity.Sale).
type PlanTerms struct {
	Cores       int
	Headroom    float64
	Drain       time.Duration
	MinReplicas int
}

// forecast answers a reservation sale's crowd forecast and the deployment planned for its peak:
// ?cores= (8), ?headroom= (0.6), ?drain= (1m) and ?min_replicas= (the node's own) size the plan.
func (s *Server) forecast(w http.ResponseWriter, r *http.Request) {
	terms, err := planTerms(r.URL.Query(), s.minReplicas)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	f, history, err := s.forecasts.Forecast(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	resp := wire.ForecastResponse{ActivityID: f.Activity.ID, Reserved: f.Reserved, ExpectedBuyers: f.ExpectedBuyers,
		ExpectedClicks: f.ExpectedClicks, ExpectedPeakRPS: f.ExpectedPeakRPS, Basis: f.Basis,
		Model: wire.CrowdModel{BuyersPerReservation: f.Model.BuyersPerReservation, ClicksPerBuyer: f.Model.ClicksPerBuyer,
			PeakFactor: f.Model.PeakFactor, Sales: f.Model.Sales},
		History: make([]wire.SaleHistory, 0, len(history))}
	for _, h := range history {
		resp.History = append(resp.History, wire.SaleHistory{ActivityID: h.ActivityID, ArchivedAt: h.ArchivedAt, Reserved: h.Reserved,
			Buyers: h.Buyers, Clicks: h.Clicks, Waves: h.Waves, WaveIntervalS: int64(h.WaveInterval / time.Second), PeakRPS: h.PeakRPS,
			PeakFactor: h.PeakFactor, Spread: h.Spread})
	}
	switch {
	case s.plan == nil:
		resp.PlanError = "this node has no measured costs to plan with"
	default:
		p, err := s.plan(f, terms)
		if errors.Is(err, sale.ErrInvalid) {
			s.writeError(w, r, err)
			return
		}
		if err != nil {
			resp.PlanError = err.Error()
		} else {
			resp.Plan = p
		}
	}
	writeJSON(w, http.StatusOK, resp)
}
