package httpapi

import (
	"net/http"
	"seckill/internal/sale"
	"time"
)

// GrabResponse is the 202 answer to a grab.
type GrabResponse struct {
	Status      string `json:"status"`
	OrderToken  string `json:"order_token"`
	AmountCents int64  `json:"amount_cents"` // the share won (red packet) or the price (item)
}

// GrabBody is what a grab may carry: nothing, or a JSON object of these fields (none yet). A
// field the grab does not define is refused, so that one a client believes in (a quantity) is
// never silently ignored.
type GrabBody struct{}

// grab is the hot path. Once an activity is sold out, the crowd is turned away by the local
// sold-out flag before its token is even checked: 410 is public knowledge, and the check costs
// more than the answer. A retry carrying an Idempotency-Key goes through, as it may be owed its
// first answer. The body is checked once the caller is known, before the risk rules and the gate
// see the grab. The route with a path token ({pass}) is the hidden grab path a solved challenge
// reveals; the gate spends the token with the grab.
func (s *Server) grab(w http.ResponseWriter, r *http.Request) {
	start, outcome, id := requestStart(w), "won", r.PathValue("id")
	defer func() {
		d := time.Since(start)
		s.observe.Grab(outcome, d)
		if _, known := s.svc.Known(id); known { // made-up ids must not grow the tracker
			s.live.Record(id, stageOf(outcome), d)
		}
	}()
	key, err := idempotencyKey(r)
	if err != nil {
		outcome = outcomeOf(err)
		s.writeError(w, r, err)
		return
	}
	pass := r.PathValue("pass")
	user, name, err := s.edge(w, r, id, key != "")
	if err == nil {
		err = decodeEmpty(w, r, &GrabBody{})
	}
	if err == nil {
		name, err = s.vet(r, id, user, pass)
	}
	var e sale.Entry
	if err == nil {
		e, err = s.svc.Enter(r.Context(), sale.GrabRequest{ActivityID: id, UserID: user, IdempotencyKey: key, Pass: pass})
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
		writeJSON(w, http.StatusAccepted, GrabResponse{Status: "QUEUED", OrderToken: e.Grab.Token, AmountCents: e.Grab.AmountCents})
		return
	}
	outcome = outcomeOr(name, err)
	s.writeError(w, r, err)
}
