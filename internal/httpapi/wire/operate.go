package wire

import "time"

// AddStockRequest is the body of POST /api/admin/activities/{id}/stock.
type AddStockRequest struct {
	Add int64 `json:"add"`
}

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

// EditActivityRequest is the body of PATCH /api/admin/activities/{id}: the terms to change,
// each one left out left as it is.
type EditActivityRequest struct {
	Name             *string            `json:"name,omitempty"`
	PriceCents       *int64             `json:"price_cents,omitempty"`
	Stock            *int64             `json:"stock,omitempty"`
	PerUserLimit     *int64             `json:"per_user_limit,omitempty"`
	StartAt          *time.Time         `json:"start_at,omitempty"`
	EndAt            *time.Time         `json:"end_at,omitempty"`
	PayWindowS       *int64             `json:"pay_window_s,omitempty"`
	RequireChallenge *bool              `json:"require_challenge,omitempty"`
	RateLimits       *RateLimitsRequest `json:"rate_limits,omitempty"`
}
