package httpapi

import (
	"encoding/csv"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"seckill/internal/httpapi/wire"
	"seckill/internal/sale"
)

// allActivities lists activities for an operator: ?since= (RFC 3339: those that end after it;
// left out, all), ?limit= (1 to sale.MaxPage, default 100), the latest start first. No gate is asked.
func (s *Server) allActivities(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var since time.Time
	if v := q.Get("since"); v != "" {
		var err error
		if since, err = time.Parse(time.RFC3339, v); err != nil {
			s.writeError(w, r, fmt.Errorf("%w: since must be an RFC 3339 time", sale.ErrInvalid))
			return
		}
	}
	acts, err := s.operator.AllActivities(r.Context(), since, queryInt(q.Get("limit"), 100))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	now := s.svc.Now()
	resp := wire.ActivitiesResponse{Activities: make([]wire.ActivityResponse, len(acts))}
	for i, a := range acts {
		resp.Activities[i] = publicView(a, nil, false, now)
	}
	writeJSON(w, http.StatusOK, resp)
}

func adminOrder(o sale.Order) wire.AdminOrderResponse {
	return wire.AdminOrderResponse{OrderResponse: orderResponse(o), User: o.UserID}
}

// orders lists a user's or an activity's orders: ?user=, ?activity=, ?limit= (1 to sale.MaxPage,
// defaultPage when left out), ?before= (the next of the page before).
func (s *Server) orders(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := sale.OrderFilter{UserID: q.Get("user"), ActivityID: q.Get("activity"), Limit: queryInt(q.Get("limit"), defaultPage),
		Before: queryInt64(q.Get("before"))}
	os, err := s.operator.Orders(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var resp wire.OrdersResponse
	resp.Orders, resp.Next = page(os, f.Limit, adminOrder, func(o sale.Order) int64 { return o.ID })
	writeJSON(w, http.StatusOK, resp)
}

// csvHeader is the first line of an activity's orders as CSV.
var csvHeader = []string{"order_id", "order_token", "user", "status", "amount_cents", "reason", "created_at", "expires_at", "closed_at"}

// exportOrders streams an activity's orders as CSV, the oldest first. Once the first row is
// sent a failure can only cut the file short: the last line then is not a whole row of the
// header's columns, which a reader checks.
func (s *Server) exportOrders(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.svc.Activity(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="orders-`+id+`.csv"`)
	cw := csv.NewWriter(w)
	cw.Write(csvHeader)
	stamp := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	err := s.operator.ExportOrders(r.Context(), id, func(o sale.Order) error {
		cw.Write([]string{strconv.FormatInt(o.ID, 10), o.Token, csvSafe(o.UserID), string(o.Status), strconv.FormatInt(o.AmountCents, 10),
			csvSafe(o.Reason), stamp(o.CreatedAt), stamp(o.ExpiresAt), stamp(o.ClosedAt)})
		return cw.Error()
	})
	cw.Flush()
	if err != nil {
		s.log.WarnContext(r.Context(), "order export cut short", "activity", id, "err", err, "request_id", requestID(w))
	}
}

// csvSafe keeps a text a spreadsheet would run as a formula (=, +, -, @ first) a text.
func csvSafe(v string) string {
	if v != "" && strings.ContainsRune("=+-@\t\r", rune(v[0])) {
		return "'" + v
	}
	return v
}

// deadLetters lists dead letters: ?activity=, ?limit= (1 to sale.MaxPage, defaultPage when left out).
func (s *Server) deadLetters(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ds, err := s.operator.DeadLetters(r.Context(), q.Get("activity"), queryInt(q.Get("limit"), defaultPage))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	resp := wire.DeadLettersResponse{DeadLetters: make([]wire.DeadLetterResponse, len(ds))}
	for i, d := range ds {
		resp.DeadLetters[i] = wire.DeadLetterResponse{Token: d.Grab.Token, ActivityID: d.Grab.ActivityID, User: d.Grab.UserID,
			AmountCents: d.Grab.AmountCents, Attempts: d.Attempts, Reason: d.Reason, At: d.At}
		if !d.Grab.At.IsZero() {
			at := d.Grab.At
			resp.DeadLetters[i].GrabbedAt = &at
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

// replayDeadLetter places a dead letter's grab, now that what refused it is fixed.
func (s *Server) replayDeadLetter(w http.ResponseWriter, r *http.Request) {
	var req wire.ReplayDeadLetterRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	noteTarget(r, req.Token)
	p, err := s.operator.ReplayDeadLetter(r.Context(), req.Token)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.ReplayedResponse{Order: adminOrder(p.Order), New: p.New})
}
