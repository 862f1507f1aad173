package httpapi

import (
	"math"
	"net/http"
	"time"

	"seckill/internal/httpapi/wire"
	"seckill/internal/ratelimit"
	"seckill/internal/sale"
)

func ticketResponse(v sale.TicketView, drawAt time.Time, joined string) wire.TicketResponse {
	resp := wire.TicketResponse{Status: string(v.Outcome), QueueToken: v.Token, ActivityID: v.ActivityID,
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
