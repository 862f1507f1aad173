package httpapi

import (
	"net/http"

	"seckill/internal/httpapi/wire"
	"seckill/internal/sale"
)

func deliveryOf(d sale.EventDelivery) wire.DeliveryResponse {
	r := wire.DeliveryResponse{Seq: d.Seq, EventID: d.ID, Type: d.Type, CreatedAt: d.At, Sink: d.Sink, State: d.State,
		Attempts: d.Attempts, NextAt: d.NextAt, LastError: d.LastError, PaymentID: d.PaymentID}
	if !d.DeliveredAt.IsZero() {
		at := d.DeliveredAt
		r.DeliveredAt = &at
	}
	if w := d.Wave; w != nil {
		opens, reserved := w.OpensAt, w.Reserved
		r.Activity = &wire.EventActivity{ID: w.ActivityID, Name: w.ActivityName}
		r.Wave, r.OpensAt, r.Reserved = w.Wave, &opens, &reserved
		return r
	}
	r.Order = &wire.EventOrder{Token: d.Order.Token, ID: d.Order.ID, ActivityID: d.Order.ActivityID, User: d.Order.UserID,
		AmountCents: d.Order.AmountCents, Status: d.Order.Status}
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
	var resp wire.DeliveriesResponse
	resp.Deliveries, resp.Next = page(ds, f.Limit, deliveryOf, func(d sale.EventDelivery) int64 { return d.Seq })
	writeJSON(w, http.StatusOK, resp)
}

// replay sends a delivery again: a parked one, or one a receiver lost.
func (s *Server) replay(w http.ResponseWriter, r *http.Request) {
	var req wire.ReplayRequest
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
