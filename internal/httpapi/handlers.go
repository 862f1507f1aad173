package httpapi

import (
	"net/http"
	"time"

	"seckill/internal/sale"
)

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.ready(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) time(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]int64{"now_ms": s.svc.Now().UnixMilli()})
}

type loginResponse struct {
	Token     string    `json:"token"`
	User      string    `json:"user"`
	ExpiresAt time.Time `json:"expires_at"`
}

// login is the demo mode's login: anyone can be anyone. Deployments with a real JWT secret
// don't serve it unless SECKILL_DEMO=1.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if !s.devLogin {
		s.writeError(w, r, sale.ErrNotFound)
		return
	}
	var req LoginRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	now := s.svc.Now()
	tok, err := s.tokens.Mint(req.User, now, LoginTTL)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, loginResponse{Token: tok, User: req.User, ExpiresAt: now.Add(LoginTTL).UTC()})
}

func (s *Server) createActivity(w http.ResponseWriter, r *http.Request) {
	var req CreateActivityRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	a, err := req.Activity()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	a, err = s.svc.CreateActivity(r.Context(), a)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/activities/"+a.ID)
	writeJSON(w, http.StatusCreated, map[string]string{"id": a.ID})
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	st, err := s.svc.Stats(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) reconcile(w http.ResponseWriter, r *http.Request) {
	rec, err := s.svc.Reconcile(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

// ActivityResponse is the public view of an activity.
type ActivityResponse struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	Kind         sale.Kind `json:"kind"`
	Status       string    `json:"status"` // upcoming, active, sold_out, ended
	Stock        int64     `json:"stock"`
	Remaining    int64     `json:"remaining"` // approximate: the gate's count when asked
	PriceCents   int64     `json:"price_cents,omitempty"`
	TotalCents   int64     `json:"total_cents,omitempty"`
	PerUserLimit int64     `json:"per_user_limit"`
	StartAt      time.Time `json:"start_at"`
	EndAt        time.Time `json:"end_at"`
	PayWindowS   int64     `json:"pay_window_s"`
	NowMS        int64     `json:"now_ms"`
}

func (s *Server) activity(w http.ResponseWriter, r *http.Request) {
	a, err := s.svc.Activity(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rem, err := s.svc.Remaining(r.Context(), a.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	now := s.svc.Now()
	status := "active"
	switch {
	case now.Before(a.StartAt):
		status = "upcoming"
	case !now.Before(a.EndAt):
		status = "ended"
	case rem == 0:
		status = "sold_out"
	}
	writeJSON(w, http.StatusOK, ActivityResponse{
		ID: a.ID, Name: a.Name, Kind: a.Kind, Status: status, Stock: a.Stock, Remaining: rem,
		PriceCents: a.PriceCents, TotalCents: a.TotalCents, PerUserLimit: a.PerUserLimit,
		StartAt: a.StartAt, EndAt: a.EndAt, PayWindowS: int64(a.PayWindow / time.Second), NowMS: now.UnixMilli(),
	})
}

// GrabResponse is the 202 answer to a grab.
type GrabResponse struct {
	Status      string `json:"status"`
	OrderToken  string `json:"order_token"`
	AmountCents int64  `json:"amount_cents"` // the share won (red packet) or the price (item)
}

// grab is the hot path. Once an activity is sold out, the crowd is turned away by the local
// sold-out flag before its token is even checked: 410 is public knowledge, and the check costs
// more than the answer. A retry carrying an Idempotency-Key goes through, as it may be owed its
// first answer.
func (s *Server) grab(w http.ResponseWriter, r *http.Request) {
	start, outcome := time.Now(), "won"
	defer func() { s.observe.Grab(outcome, time.Since(start)) }()
	fail := func(err error, name string) {
		if outcome = name; name == "" {
			outcome = outcomeOf(err)
		}
		s.writeError(w, r, err)
	}
	id := r.PathValue("id")
	key, err := idempotencyKey(r)
	if err != nil {
		fail(err, "")
		return
	}
	if key == "" && s.svc.SoldOut(id) {
		fail(sale.ErrSoldOut, "sold_out_edge")
		return
	}
	ip := s.clientIP(r)
	if err := s.limit(w, r, s.limits.Windows, "ip:"+ip.String(), s.limits.PerIP); err != nil {
		fail(err, limitOutcome(err, "ip"))
		return
	}
	if s.svc.IPBlocked(ip) {
		fail(sale.ErrBlocked, "blocked_ip")
		return
	}
	user, err := s.authenticate(r)
	if err != nil {
		fail(err, "")
		return
	}
	if s.svc.UserBlocked(user) {
		fail(sale.ErrBlocked, "blocked_user")
		return
	}
	if err := s.limit(w, r, s.limits.Buckets, "user:"+user, s.limits.PerUser); err != nil {
		fail(err, limitOutcome(err, "user"))
		return
	}
	if err := s.limit(w, r, s.limits.Buckets, "act:"+id, s.limits.PerActivity); err != nil {
		fail(err, limitOutcome(err, "activity"))
		return
	}
	g, err := s.svc.Grab(r.Context(), id, user, key)
	if err != nil {
		fail(err, "")
		return
	}
	writeJSON(w, http.StatusAccepted, GrabResponse{Status: "QUEUED", OrderToken: g.Token, AmountCents: g.AmountCents})
}

// OrderResponse is an order as its owner sees it.
type OrderResponse struct {
	Status      sale.Status `json:"status"`
	OrderID     int64       `json:"order_id,omitempty"`
	OrderToken  string      `json:"order_token"`
	ActivityID  string      `json:"activity_id"`
	AmountCents int64       `json:"amount_cents"`
	Reason      string      `json:"reason,omitempty"`
	CreatedAt   time.Time   `json:"created_at"`
	ExpiresAt   *time.Time  `json:"expires_at,omitempty"`
	ClosedAt    *time.Time  `json:"closed_at,omitempty"`
}

func orderResponse(o sale.Order) OrderResponse {
	resp := OrderResponse{Status: o.Status, OrderID: o.ID, OrderToken: o.Token, ActivityID: o.ActivityID,
		AmountCents: o.AmountCents, Reason: o.Reason, CreatedAt: o.CreatedAt}
	if !o.ExpiresAt.IsZero() && o.Status != sale.StatusFailed {
		resp.ExpiresAt = &o.ExpiresAt
	}
	if !o.ClosedAt.IsZero() {
		resp.ClosedAt = &o.ClosedAt
	}
	return resp
}

func (s *Server) order(w http.ResponseWriter, r *http.Request, user string) {
	o, err := s.svc.Order(r.Context(), user, r.PathValue("ref"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, orderResponse(o))
}

func (s *Server) pay(w http.ResponseWriter, r *http.Request, user string) {
	o, err := s.svc.Pay(r.Context(), user, r.PathValue("ref"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, orderResponse(o))
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request, user string) {
	o, err := s.svc.Cancel(r.Context(), user, r.PathValue("ref"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, orderResponse(o))
}
