package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"seckill/internal/httpapi/wire"
	"seckill/internal/risk"
	"seckill/internal/sale"
)

// pageOf is a grab's signals as the risk engine takes them. Errors: sale.ErrInvalid, naming the one a
// page cannot have measured.
func pageOf(b wire.GrabBody) (*risk.Page, error) {
	g := b.Signals
	if g == nil {
		return nil, nil
	}
	if g.LoadToClickMs < 0 || g.LoadToClickMs > risk.MaxLoadToClick.Milliseconds() {
		return nil, fmt.Errorf("%w: signals: load_to_click_ms %d: want 0 to %d", sale.ErrInvalid, g.LoadToClickMs, risk.MaxLoadToClick.Milliseconds())
	}
	p := &risk.Page{Moves: g.Moves, PathPx: g.PathPx, DirectionEntropy: g.DirectionEntropy, SpeedCV: g.SpeedCV, Touch: g.Touch,
		LoadToClick: time.Duration(g.LoadToClickMs) * time.Millisecond, Fingerprint: g.Fingerprint}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("%w: signals: %v", sale.ErrInvalid, err)
	}
	return p, nil
}

// grab is the hot path. Once an activity is sold out, the crowd is turned away by the local
// sold-out flag before its token is even checked: 410 is public knowledge, and the check costs
// more than the answer. A retry carrying an Idempotency-Key goes through, as it may be owed its
// first answer. The body is checked once the caller is known, before the risk rules and the gate
// see the grab. The route with a path token ({pass}) is the hidden grab path a solved challenge
// reveals; the gate spends the token with the grab.
func (s *Server) grab(w http.ResponseWriter, r *http.Request) {
	start, outcome, id, user := requestStart(w), "won", r.PathValue("id"), ""
	defer func() {
		d := time.Since(start)
		s.observe.Grab(outcome, d)
		if a, known := s.svc.Known(id); known { // made-up ids must not grow the tracker
			s.live.Record(id, stageOf(outcome), d)
			if s.forecasts != nil && a.Admission == sale.AdmitReservation { // the load it takes, for its forecasts
				if user == "" && outcome == outcomeSoldOutEdge {
					user, _, _ = s.authenticate(r) // turned away unread: named for the forecast (a bad token names nobody)
				}
				s.forecasts.Record(a, user, s.svc.Now())
			}
		}
	}()
	key, err := idempotencyKey(r)
	if err != nil {
		outcome = outcomeOf(err)
		s.writeError(w, r, err)
		return
	}
	pass := r.PathValue("pass")
	c, name, err := s.edge(w, r, id, key != "", true)
	user = c.user
	var body wire.GrabBody
	if err == nil {
		err = decodeEmpty(w, r, &body)
	}
	var page *risk.Page
	if err == nil {
		page, err = pageOf(body)
	}
	if err == nil {
		name, err = s.vet(r, id, c, pass, page)
	}
	var e sale.Entry
	if err == nil {
		e, err = s.svc.Enter(r.Context(), sale.GrabRequest{ActivityID: id, UserID: c.user, IdempotencyKey: key, Pass: pass, UserRate: c.rate})
	}
	if th := (sale.Throttled{}); errors.As(err, &th) { // the user's rate, checked by the gate
		w.Header()["Retry-After"] = retryAfterHeader(th.RetryAfter)
		name = "rate_limited_user"
	} else if wn := (sale.WaveNotOpen{}); errors.As(err, &wn) {
		w.Header()["Retry-After"] = retryAfterHeader(wn.RetryAfter(s.svc.Now()))
	}
	switch {
	case err == nil && e.Lined:
		status := "JOINED"
		outcome = "joined"
		if !e.Fresh {
			outcome, status = "already_queued", "ALREADY_QUEUED"
		}
		writeJSON(w, http.StatusAccepted, ticketResponse(e.Ticket, e.Activity.StartAt, status))
		return
	case err == nil:
		writeJSON(w, http.StatusAccepted, wire.GrabResponse{Status: "QUEUED", OrderToken: e.Grab.Token, AmountCents: e.Grab.AmountCents})
		return
	}
	outcome = outcomeOr(name, err)
	s.writeError(w, r, err)
}

// maxIdempotencyKey bounds the Idempotency-Key header.
const maxIdempotencyKey = 128

func idempotencyKey(r *http.Request) (string, error) {
	k := r.Header.Get("Idempotency-Key")
	if len(k) > maxIdempotencyKey {
		return "", fmt.Errorf("%w: Idempotency-Key is over %d bytes", sale.ErrInvalid, maxIdempotencyKey)
	}
	for i := 0; i < len(k); i++ {
		if k[i] < '!' || k[i] > '~' {
			return "", fmt.Errorf("%w: Idempotency-Key must be printable ASCII without spaces", sale.ErrInvalid)
		}
	}
	return k, nil
}
