package wire

import "time"

// BoardResponse is a leaderboard's top, or one user's standing (sale.Board).
type BoardResponse struct {
	Entries  []StandingResponse `json:"entries"`
	Exact    bool               `json:"exact"`
	Bound    int64              `json:"bound,omitempty"` // approximate: the most a rank may be off
	Strategy string             `json:"strategy"`
}

// StandingResponse is a place on a leaderboard (sale.Standing).
type StandingResponse struct {
	Rank        int64     `json:"rank"`
	UserID      string    `json:"user"`
	AmountCents int64     `json:"amount_cents"`
	GrabbedAt   time.Time `json:"grabbed_at"`
}
