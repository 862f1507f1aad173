package wire

import "time"

// ActivitiesResponse is the operator's list of activities, ended ones included.
type ActivitiesResponse struct {
	Activities []ActivityResponse `json:"activities"`
}

// AdminOrderResponse is an order as an operator sees it: whose it is too.
type AdminOrderResponse struct {
	OrderResponse
	User string `json:"user"`
}

// OrdersResponse is a page of orders, newest first; Next is the before of the next page.
type OrdersResponse struct {
	Orders []AdminOrderResponse `json:"orders"`
	Next   int64                `json:"next,omitempty"`
}

// DeadLetterResponse is a grab the workers gave up on.
type DeadLetterResponse struct {
	Token       string    `json:"token"`
	ActivityID  string    `json:"activity_id"`
	User        string    `json:"user"`
	AmountCents int64     `json:"amount_cents"`
	Attempts    int       `json:"attempts"`
	Reason      string    `json:"reason"`
	At          time.Time `json:"at"`
	// GrabbedAt is when the gate granted it; left out for a dead letter kept without its grab,
	// which cannot be replayed.
	GrabbedAt *time.Time `json:"grabbed_at,omitempty"`
}

// DeadLettersResponse lists dead letters, newest first.
type DeadLettersResponse struct {
	DeadLetters []DeadLetterResponse `json:"dead_letters"`
}

// ReplayDeadLetterRequest names the dead letter to place.
type ReplayDeadLetterRequest struct {
	Token string `json:"token"`
}

// ReplayedResponse is the order a replayed dead letter became.
type ReplayedResponse struct {
	Order AdminOrderResponse `json:"order"`
	New   bool               `json:"new"` // false: the grab had an order already
}
