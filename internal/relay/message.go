package relay

import (
	"encoding/json"
	"time"

	"seckill/internal/sale"
)

// Message is an event as every sink sends it: the body of a webhook's POST, the value of a
// Kafka record. An order's event has Order; an activity's (activity.wave_opening) has Activity
// and the wave's fields instead.
type Message struct {
	ID        string        `json:"id"`
	Type      string        `json:"type"`
	CreatedAt time.Time     `json:"created_at"`
	Order     *MessageOrder `json:"order,omitempty"`
	// PaymentID names the payment the event is about: the one that paid the order, or the
	// one to give back (order.refund_requested, order.refunded).
	PaymentID string `json:"payment_id,omitempty"`
	// ReceivedCents is, with PaymentID, what the provider took for it: on the refund events
	// what to give back (not the order's amount when the provider took another).
	ReceivedCents *int64 `json:"received_cents,omitempty"`

	// Activity is the reservation sale whose Wave opens at OpensAt, Reserved reservers entering
	// in it (activity.wave_opening).
	Activity *MessageActivity `json:"activity,omitempty"`
	Wave     int64            `json:"wave,omitempty"`
	OpensAt  *time.Time       `json:"opens_at,omitempty"`
	Reserved *int64           `json:"reserved,omitempty"`
}

// MessageOrder is the order as the event left it.
type MessageOrder struct {
	Token       string `json:"order_token"`
	ID          int64  `json:"order_id"`
	ActivityID  string `json:"activity_id"`
	User        string `json:"user"`
	AmountCents int64  `json:"amount_cents"`
	Status      string `json:"status"`
	Reason      string `json:"reason,omitempty"`
}

// MessageActivity names the activity an activity's event is about (its name when the event was
// written).
type MessageActivity struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Body is the JSON of e, as the sinks send it.
func Body(e sale.Event) ([]byte, error) {
	m := Message{ID: e.ID, Type: string(e.Type), CreatedAt: e.At.UTC()}
	if w := e.Wave; w != nil {
		opens, reserved := w.OpensAt.UTC(), w.Reserved
		m.Activity = &MessageActivity{ID: w.ActivityID, Name: w.ActivityName}
		m.Wave, m.OpensAt, m.Reserved = w.Wave, &opens, &reserved
		return json.Marshal(m)
	}
	o := e.Order
	m.Order = &MessageOrder{Token: o.Token, ID: o.ID, ActivityID: o.ActivityID, User: o.UserID, AmountCents: o.AmountCents,
		Status: string(o.Status), Reason: o.Reason}
	m.PaymentID = e.PaymentID
	if e.PaymentID != "" {
		m.ReceivedCents = &e.ReceivedCents
	}
	return json.Marshal(m)
}
