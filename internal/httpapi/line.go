package httpapi

import (
	"math"
	"net/http"
	"time"

	"seckill/internal/ratelimit"
	"seckill/internal/sale"
)

// TicketResponse is a ticket in a queue or lottery line as its owner sees it: the answer to a
// grab that joined the line (202) and to GET /api/queue/{token}.
type TicketResponse struct {
	// Status is WAITING (JOINED in the 202 of a first join, ALREADY_QUEUED when the user had a
	// ticket waiting), then WON, SOLD_OUT, NOT_DRAWN, ALREADY_BOUGHT or ENDED.
	Status     string         `json:"status"`
	QueueToken string         `json:"queue_token"`
	ActivityID string         `json:"activity_id"`
	Admission  sale.Admission `json:"admission"`
	// Position counts the tickets up to this one (1: next); null while the early crowd awaits
	// the draw at the start, and once answered.
	Position *int64 `json:"position"`
	// Place is the ticket's place in the line from its first (1), fixed once given: the draw's
	// for the early crowd, the order of arrival after; null while the early crowd awaits the draw.
	Place          *int64    `json:"place"`
	EstimatedWaitS *float64  `json:"estimated_wait_s"`
	Early          bool      `json:"early"` // joined before the start: placed by the draw
	JoinedAt       time.Time `json:"joined_at"`
	DrawAt         time.Time `json:"draw_at"` // the start, when the early crowd is drawn
	OrderToken     string    `json:"order_token,omitempty"`
	AmountCents    int64     `json:"amount_cents,omitempty"`
	Waiting        int64     `json:"waiting"` // the line's length
}

func ticketResponse(v sale.TicketView, drawAt time.Time, joined string) TicketResponse {
	resp := TicketResponse{Status: string(v.Outcome), QueueToken: v.Token, ActivityID: v.ActivityID,
		Admission: v.Admission, Early: v.Early, JoinedAt: v.JoinedAt, DrawAt: drawAt, OrderToken: v.OrderToken,
		AmountCents: v.AmountCents, Waiting: v.Line.Waiting()}
	if v.Place >= 0 {
		place := v.Place + 1
		resp.Place = &place
	}
	if v.Outcome == sale.OutcomeWaiting {
		if joined != "" {
			resp.Status = joined
		}
		if v.Position > 0 {
			resp.Position = &v.Position
		}
		wait := math.Round(v.Wait.Seconds()*10) / 10
		resp.EstimatedWaitS = &wait
	}
	return resp
}

// pollRule bounds how often one user may ask where a ticket stands: the page asks every second
// or two, and a storm of polls must not cost the line more than that.
var pollRule = ratelimit.Rule{PerSecond: 4, Burst: 8}

// ticket answers GET /api/queue/{token} for the ticket's owner: another user's ticket, or one
// that does not exist, is 404.
func (s *Server) ticket(w http.ResponseWriter, r *http.Request, user string) {
	if err := s.limit(w, r, s.limits.Buckets, "poll:"+user, pollRule); err != nil {
		s.writeError(w, r, err)
		return
	}
	v, err := s.lines.Ticket(r.Context(), user, r.PathValue("token"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	a, err := s.svc.Activity(r.Context(), v.ActivityID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ticketResponse(v, a.StartAt, ""))
}
