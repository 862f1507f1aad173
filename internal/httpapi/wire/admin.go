package wire

import "seckill/internal/breaker"

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
	RefundPending int64                     `json:"refund_pending"`
	Refunded      int64                     `json:"refunded"`
	PendingQueue  int64                     `json:"pending_queue"`
	DeadLetters   int64                     `json:"dead_letters"`
	Line          *LineStatsResponse        `json:"line,omitempty"`
	Reservation   *ReservationStatsResponse `json:"reservation,omitempty"`
	Health        breaker.Level             `json:"health"`
	Leaderboard   *BoardUsageResponse       `json:"leaderboard,omitempty"`
}

// ReservationStatsResponse is a reservation sale's reservations (sale.ReservationStats), counted
// at most 5 s ago: how many reserved, and per wave (a wave 0 before the close) the reservers,
// those of them who grabbed a unit and those who hold it still.
type ReservationStatsResponse struct {
	Reserved int64               `json:"reserved"`
	Waves    []WaveStatsResponse `json:"waves"`
}

// WaveStatsResponse is one wave of a reservation sale (sale.WaveStats).
type WaveStatsResponse struct {
	Wave     int64 `json:"wave"`
	Reserved int64 `json:"reserved"`
	Grabbed  int64 `json:"grabbed"`
	Won      int64 `json:"won"`
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
