package httpapi

import (
	"context"
	"errors"
	"net/http"
	"seckill/internal/breaker"
	"seckill/internal/sale"
)

// StatsResponse is an activity's stats (sale.Stats) with the node's health, and for a red packet
// the strategy and memory of its leaderboard.
type StatsResponse struct {
	Stock     int64 `json:"stock"`
	Remaining int64 `json:"remaining"`
	Grabbed   int64 `json:"grabbed"`
	Orders    int64 `json:"orders"`
	Created   int64 `json:"created"`
	Paid      int64 `json:"paid"`
	Cancelled int64 `json:"cancelled"`
	Expired   int64 `json:"expired"` // of the cancelled, those whose payment window closed
	Failed    int64 `json:"failed"`
	// RefundPending and Refunded are orders whose payment came after they were cancelled.
	RefundPending int64               `json:"refund_pending"`
	Refunded      int64               `json:"refunded"`
	PendingQueue  int64               `json:"pending_queue"`
	DeadLetters   int64               `json:"dead_letters"`
	Line          *LineStatsResponse  `json:"line,omitempty"`
	Health        breaker.Level       `json:"health"`
	Leaderboard   *BoardUsageResponse `json:"leaderboard,omitempty"`
}

func statsResponse(st sale.Stats, level breaker.Level) StatsResponse {
	return StatsResponse{Stock: st.Stock, Remaining: st.Remaining, Grabbed: st.Grabbed, Orders: st.Orders, Created: st.Created,
		Paid: st.Paid, Cancelled: st.Cancelled, Expired: st.Expired, Failed: st.Failed, RefundPending: st.RefundPending,
		Refunded: st.Refunded, PendingQueue: st.PendingQueue,
		DeadLetters: st.DeadLetters, Line: lineStatsResponse(st.Line), Health: level}
}

// LineStatsResponse is a queue or lottery activity's line for the dashboard (sale.LineStats).
type LineStatsResponse struct {
	Joined    int64   `json:"joined"`   // tickets ever taken
	Waiting   int64   `json:"waiting"`  // not answered yet: the line's length
	Answered  int64   `json:"answered"` // admitted to the gate or answered sold out
	Early     int64   `json:"early"`    // the early crowd, shuffled at the start
	Sealed    bool    `json:"sealed"`
	DrainRate float64 `json:"drain_rate"` // admissions a second, measured by the drainer
	WaitS     float64 `json:"wait_s"`     // the estimated wait at the tail of the line
}

func lineStatsResponse(ls *sale.LineStats) *LineStatsResponse {
	if ls == nil {
		return nil
	}
	return &LineStatsResponse{Joined: ls.Joined, Waiting: ls.Waiting, Answered: ls.Answered, Early: ls.Early,
		Sealed: ls.Sealed, DrainRate: ls.DrainRate, WaitS: ls.WaitS}
}

// BoardUsageResponse is what one red packet's leaderboard costs (sale.BoardUsage).
type BoardUsageResponse struct {
	ActivityID string `json:"activity"`
	Strategy   string `json:"strategy"`
	Bytes      int64  `json:"bytes"`
}

// ReconcileResponse is a reconciliation's outcome (sale.Reconciliation).
type ReconcileResponse struct {
	OK                bool   `json:"ok"`
	Stock             int64  `json:"stock"`
	GateRemaining     int64  `json:"gate_remaining"`
	ExpectedRemaining int64  `json:"expected_remaining"` // stock less what the database and queue hold
	Held              int64  `json:"held"`
	Drift             int64  `json:"drift"` // gate_remaining - expected_remaining
	Repaired          bool   `json:"repaired"`
	Outcome           string `json:"outcome"` // ok, drift, repaired, unsettled or archived
	Note              string `json:"note,omitempty"`
}

// ShedStatsResponse is what a node answers when it cannot answer everything: at degraded, or
// with a dependency away. Shed names what is left out: "counts" (the database's, and the queue's
// depth) or "gate" (remaining and grabbed, when the gate does not answer: Redis failing over).
type ShedStatsResponse struct {
	Stock         int64         `json:"stock"`
	Remaining     *int64        `json:"remaining,omitempty"`
	Grabbed       *int64        `json:"grabbed,omitempty"`
	Orders        *int64        `json:"orders,omitempty"`
	Created       *int64        `json:"created,omitempty"`
	Paid          *int64        `json:"paid,omitempty"`
	Cancelled     *int64        `json:"cancelled,omitempty"`
	Expired       *int64        `json:"expired,omitempty"`
	Failed        *int64        `json:"failed,omitempty"`
	RefundPending *int64        `json:"refund_pending,omitempty"`
	Refunded      *int64        `json:"refunded,omitempty"`
	DeadLetters   *int64        `json:"dead_letters,omitempty"`
	Health        breaker.Level `json:"health"`
	Shed          []string      `json:"shed"`
	// Line is a queue or lottery activity's line: its state is beside the gate.
	Line *LineStatsResponse `json:"line,omitempty"`
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
				resp.Leaderboard = &BoardUsageResponse{ActivityID: u.ActivityID, Strategy: u.Strategy, Bytes: u.Bytes}
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
	writeJSON(w, http.StatusOK, ReconcileResponse{OK: rec.OK, Stock: rec.Stock, GateRemaining: rec.GateRemaining,
		ExpectedRemaining: rec.ExpectedRemaining, Held: rec.Held, Drift: rec.Drift, Repaired: rec.Repaired,
		Outcome: rec.Outcome, Note: rec.Note})
}
