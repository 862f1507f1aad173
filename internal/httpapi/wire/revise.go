package wire

import "time"

// AddStockRequest is the body of POST /api/admin/activities/{id}/stock.
type AddStockRequest struct {
	Add int64 `json:"add"`
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
