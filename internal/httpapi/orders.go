package httpapi

import (
	"context"
	"net/http"

	"seckill/internal/httpapi/wire"
	"seckill/internal/sale"
)

func orderResponse(o sale.Order) wire.OrderResponse {
	resp := wire.OrderResponse{Status: o.Status, OrderID: o.ID, OrderToken: o.Token, ActivityID: o.ActivityID,
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
