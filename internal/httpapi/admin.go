package httpapi

import (
	"context"
	"errors"
	"net/http"
	"seckill/internal/health"
	"seckill/internal/sale"
)

// StatsResponse is an activity's stats with the node's health, and for a red packet the
// strategy and memory of its leaderboard.
type StatsResponse struct {
	sale.Stats
	Health      health.Level     `json:"health"`
	Leaderboard *sale.BoardUsage `json:"leaderboard,omitempty"`
}

// ShedStatsResponse is what a node answers when it cannot answer everything: at degraded, or
// with a dependency away. Shed names what is left out: "counts" (the database's, and the queue's
// depth) or "gate" (remaining and grabbed, when the gate does not answer: Redis failing over).
type ShedStatsResponse struct {
	Stock       int64        `json:"stock"`
	Remaining   *int64       `json:"remaining,omitempty"`
	Grabbed     *int64       `json:"grabbed,omitempty"`
	Orders      *int64       `json:"orders,omitempty"`
	Created     *int64       `json:"created,omitempty"`
	Paid        *int64       `json:"paid,omitempty"`
	Cancelled   *int64       `json:"cancelled,omitempty"`
	Expired     *int64       `json:"expired,omitempty"`
	Failed      *int64       `json:"failed,omitempty"`
	DeadLetters *int64       `json:"dead_letters,omitempty"`
	Health      health.Level `json:"health"`
	Shed        []string     `json:"shed"`
	// Line is a queue or lottery activity's line: its state is beside the gate.
	Line *sale.LineStats `json:"line,omitempty"`
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
func (s *Server) statsOf(ctx context.Context, id string, level health.Level) (any, error) {
	if level != health.Degraded {
		st, err := s.svc.Stats(ctx, id)
		if err == nil {
			resp := StatsResponse{Stats: st, Health: level}
			if u, err := s.svc.LeaderboardUsage(ctx, id); err == nil {
				resp.Leaderboard = &u
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
	resp := ShedStatsResponse{Stock: a.Stock, Health: level}
	switch st, err := s.svc.GateStats(ctx, id); {
	case err == nil:
		resp.Remaining, resp.Grabbed, resp.Line = &st.Remaining, &st.Grabbed, st.Line
	case errors.Is(err, sale.ErrBusy):
		resp.Shed = append(resp.Shed, "gate")
	default:
		return nil, err
	}
	if level == health.Degraded {
		resp.Shed = append(resp.Shed, "counts")
		return resp, nil
	}
	switch c, err := s.svc.Counts(ctx, id); {
	case err == nil:
		resp.Orders, resp.Created, resp.Paid, resp.Cancelled = &c.Orders, &c.Created, &c.Paid, &c.Cancelled
		resp.Expired, resp.Failed, resp.DeadLetters = &c.Expired, &c.Failed, &c.DeadLetters
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
	writeJSON(w, http.StatusOK, rec)
}
