package httpapi

import (
	"context"
	"errors"
	"net/http"

	"seckill/internal/breaker"
	"seckill/internal/httpapi/wire"
	"seckill/internal/sale"
)

func statsResponse(st sale.Stats, level breaker.Level) wire.StatsResponse {
	return wire.StatsResponse{Stock: st.Stock, Remaining: st.Remaining, Grabbed: st.Grabbed, Orders: st.Orders, Created: st.Created,
		Paid: st.Paid, Cancelled: st.Cancelled, Expired: st.Expired, Failed: st.Failed, RefundPending: st.RefundPending,
		Refunded: st.Refunded, PendingQueue: st.PendingQueue,
		DeadLetters: st.DeadLetters, Line: lineStatsResponse(st.Line), Health: level}
}

func lineStatsResponse(ls *sale.LineStats) *wire.LineStatsResponse {
	if ls == nil {
		return nil
	}
	return &wire.LineStatsResponse{Joined: ls.Joined, Waiting: ls.Waiting, Answered: ls.Answered, Early: ls.Early,
		Sealed: ls.Sealed, DrainRate: ls.DrainRate, WaitS: ls.WaitS}
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	v, err := s.statsOf(r.Context(), r.PathValue("id"), s.health.Level())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// statsOf is an activity's stats as a node at level can answer them: all of them (a
// StatsResponse); otherwise a ShedStatsResponse of what its dependencies still answer. At
// degraded the database's counts are shed; a gate that does not answer (Redis failing over)
// sheds its own numbers, and a database that does not, its counts. Only an activity that does
// not exist is an error: an admin watching a failover keeps seeing what is known. The stats
// endpoint and the live stream both answer with it.
func (s *Server) statsOf(ctx context.Context, id string, level breaker.Level) (any, error) {
	if level != breaker.Degraded {
		st, err := s.svc.Stats(ctx, id)
		if err == nil {
			resp := statsResponse(st, level)
			if u, err := s.boards.Usage(ctx, id); err == nil {
				resp.Leaderboard = &wire.BoardUsageResponse{ActivityID: u.ActivityID, Strategy: u.Strategy, Bytes: u.Bytes}
			}
			if s.reservations != nil {
				if rs, err := s.reservations.Stats(ctx, id); err == nil {
					resp.Reservation = reservationStats(rs)
				}
			}
			return resp, nil
		}
		if !errors.Is(err, sale.ErrBusy) {
			return nil, err
		}
	}
	a, err := s.svc.Activity(ctx, id)
	if err != nil {
		return nil, err
	}
	resp := wire.ShedStatsResponse{Stock: a.Stock, Health: level}
	switch st, err := s.svc.GateStats(ctx, id); {
	case err == nil:
		resp.Remaining, resp.Grabbed, resp.Line = &st.Remaining, &st.Grabbed, lineStatsResponse(st.Line)
	case errors.Is(err, sale.ErrBusy):
		resp.Shed = append(resp.Shed, "gate")
	default:
		return nil, err
	}
	if level == breaker.Degraded {
		resp.Shed = append(resp.Shed, "counts")
		return resp, nil
	}
	switch c, err := s.operator.Counts(ctx, id); {
	case err == nil:
		resp.Orders, resp.Created, resp.Paid, resp.Cancelled = &c.Orders, &c.Created, &c.Paid, &c.Cancelled
		resp.Expired, resp.Failed, resp.DeadLetters = &c.Expired, &c.Failed, &c.DeadLetters
		resp.RefundPending, resp.Refunded = &c.RefundPending, &c.Refunded
	case errors.Is(err, sale.ErrBusy):
		resp.Shed = append(resp.Shed, "counts")
	default:
		return nil, err
	}
	return resp, nil
}

func (s *Server) reconcile(w http.ResponseWriter, r *http.Request) {
	if err := decodeEmpty(w, r, &struct{}{}); err != nil {
		s.writeError(w, r, err)
		return
	}
	rec, err := s.svc.Reconcile(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.ReconcileResponse{OK: rec.OK, Stock: rec.Stock, GateRemaining: rec.GateRemaining,
		ExpectedRemaining: rec.ExpectedRemaining, Held: rec.Held, Drift: rec.Drift, Repaired: rec.Repaired,
		Outcome: rec.Outcome, Note: rec.Note})
}

// reservationStats is the stats' view of a reservation sale's reservations.
func reservationStats(rs sale.ReservationStats) *wire.ReservationStatsResponse {
	v := &wire.ReservationStatsResponse{Reserved: rs.Reserved, Waves: make([]wire.WaveStatsResponse, len(rs.Waves))}
	for i, w := range rs.Waves {
		v.Waves[i] = wire.WaveStatsResponse{Wave: w.Wave, Reserved: w.Reserved, Grabbed: w.Grabbed, Won: w.Won}
	}
	return v
}
