package httpapi

import (
	"net/http"
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
	Order       EventOrder         `json:"order"`
	PaymentID   string             `json:"payment_id,omitempty"` // the payment the event is about
	// ReceivedCents is, with PaymentID, what the provider took for it (what a refund gives back).
	ReceivedCents *int64 `json:"received_cents,omitempty"`
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

func deliveryOf(d sale.EventDelivery) DeliveryResponse {
	r := DeliveryResponse{Seq: d.Seq, EventID: d.ID, Type: d.Type, CreatedAt: d.At, Sink: d.Sink, State: d.State,
		Attempts: d.Attempts, NextAt: d.NextAt, LastError: d.LastError,
		Order: EventOrder{Token: d.Order.Token, ID: d.Order.ID, ActivityID: d.Order.ActivityID, User: d.Order.UserID,
			AmountCents: d.Order.AmountCents, Status: d.Order.Status}, PaymentID: d.PaymentID}
	if !d.DeliveredAt.IsZero() {
		at := d.DeliveredAt
		r.DeliveredAt = &at
	}
	if d.PaymentID != "" {
		cents := d.ReceivedCents
		r.ReceivedCents = &cents
	}
	return r
}

// deliveries lists the order events' deliveries: ?state=pending|delivered|parked, ?sink=,
// ?limit= (1 to sale.MaxPage, defaultPage when left out), ?before= (the next of the page before).
func (s *Server) deliveries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := sale.DeliveryFilter{Sink: q.Get("sink"), State: sale.DeliveryState(q.Get("state")), Limit: queryInt(q.Get("limit"), defaultPage),
		Before: queryInt64(q.Get("before"))}
	ds, err := s.outbox.Deliveries(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var resp DeliveriesResponse
	resp.Deliveries, resp.Next = page(ds, f.Limit, deliveryOf, func(d sale.EventDelivery) int64 { return d.Seq })
	writeJSON(w, http.StatusOK, resp)
}

// replay sends a delivery again: a parked one, or one a receiver lost.
func (s *Server) replay(w http.ResponseWriter, r *http.Request) {
	var req ReplayRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	noteTarget(r, req.EventID+" to "+req.Sink)
	d, err := s.outbox.Replay(r.Context(), req.Sink, req.EventID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, deliveryOf(d))
}
