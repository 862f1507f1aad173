package wire

import (
	"time"

	"seckill/internal/sale"
)

// DeliveryResponse is an order event's delivery to one sink (a webhook receiver).
type DeliveryResponse struct {
	Seq         int64              `json:"seq"`
	EventID     string             `json:"event_id"`
	Type        sale.EventType     `json:"type"`
	CreatedAt   time.Time          `json:"created_at"`
	Sink        string             `json:"sink"`
	State       sale.DeliveryState `json:"state"`
	Attempts    int                `json:"attempts"`
	NextAt      time.Time          `json:"next_at"`
	LastError   string             `json:"last_error,omitempty"`
	DeliveredAt *time.Time         `json:"delivered_at,omitempty"`
	Order       *EventOrder        `json:"order,omitempty"`      // an order's event
	PaymentID   string             `json:"payment_id,omitempty"` // the payment the event is about
	// ReceivedCents is, with PaymentID, what the provider took for it (what a refund gives back).
	ReceivedCents *int64 `json:"received_cents,omitempty"`
	// An activity's event (activity.wave_opening): the reservation sale whose Wave opens at
	// OpensAt, Reserved reservers entering in it.
	Activity *EventActivity `json:"activity,omitempty"`
	Wave     int64          `json:"wave,omitempty"`
	OpensAt  *time.Time     `json:"opens_at,omitempty"`
	Reserved *int64         `json:"reserved,omitempty"`
}

// EventActivity names the activity of an activity's event, as the event was written.
type EventActivity struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// EventOrder is the order as the event left it.
type EventOrder struct {
	Token       string      `json:"order_token"`
	ID          int64       `json:"order_id"`
	ActivityID  string      `json:"activity_id"`
	User        string      `json:"user"`
	AmountCents int64       `json:"amount_cents"`
	Status      sale.Status `json:"status"`
}

// DeliveriesResponse is a page of deliveries, newest first; Next is the before of the next page.
type DeliveriesResponse struct {
	Deliveries []DeliveryResponse `json:"deliveries"`
	Next       int64              `json:"next,omitempty"`
}

// ReplayRequest names the delivery to send again.
type ReplayRequest struct {
	Sink    string `json:"sink"`
	EventID string `json:"event_id"`
}
