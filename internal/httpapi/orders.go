package httpapi

import (
	"context"
	"net/http"
	"seckill/internal/sale"
	"time"
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

func orderResponse(o sale.Order) OrderResponse {
	resp := OrderResponse{Status: o.Status, OrderID: o.ID, OrderToken: o.Token, ActivityID: o.ActivityID,
		AmountCents: o.AmountCents, Reason: o.Reason, CreatedAt: o.CreatedAt}
	if !o.ExpiresAt.IsZero() && o.Status != sale.StatusFailed {
		resp.ExpiresAt = &o.ExpiresAt
	}
	if !o.ClosedAt.IsZero() {
		resp.ClosedAt = &o.ClosedAt
	}
	return resp
}

func (s *Server) order(w http.ResponseWriter, r *http.Request, user string) {
	o, err := s.svc.Order(r.Context(), user, r.PathValue("ref"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, orderResponse(o))
}

// pay pays the buyer's order, or, with a payment provider, starts its payment there.
func (s *Server) pay(w http.ResponseWriter, r *http.Request, user string) {
	if s.payments != nil {
		s.startPayment(w, r, user)
		return
	}
	s.changeOrder(w, r, user, s.svc.Pay)
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request, user string) {
	s.changeOrder(w, r, user, s.svc.Cancel)
}

// changeOrder answers a buyer's change to their order (pay, cancel): an empty body, one call,
// the order as it is now.
func (s *Server) changeOrder(w http.ResponseWriter, r *http.Request, user string,
	change func(ctx context.Context, userID, ref string) (sale.Order, error)) {
	if err := decodeEmpty(w, r, &struct{}{}); err != nil {
		s.writeError(w, r, err)
		return
	}
	o, err := change(r.Context(), user, r.PathValue("ref"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, orderResponse(o))
}
