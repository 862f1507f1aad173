package wire

import (
	"time"

	"seckill/internal/sale"
)

// OrderResponse is an order as its owner sees it.
type OrderResponse struct {
	Status      sale.Status `json:"status"`
	OrderID     int64       `json:"order_id,omitempty"`
	OrderToken  string      `json:"order_token"`
	ActivityID  string      `json:"activity_id"`
	AmountCents int64       `json:"amount_cents"`
	Reason      string      `json:"reason,omitempty"`
	CreatedAt   time.Time   `json:"created_at"`
	ExpiresAt   *time.Time  `json:"expires_at,omitempty"`
	ClosedAt    *time.Time  `json:"closed_at,omitempty"`
	// Payment is the payment the pay call started, with a provider.
	Payment *PaymentResponse `json:"payment,omitempty"`
}
