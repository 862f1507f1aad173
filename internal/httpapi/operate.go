package httpapi

import (
	"net/http"

	"seckill/internal/sale"
)

// AddStockRequest is the body of POST /api/admin/activities/{id}/stock.
type AddStockRequest struct {
	Add int64 `json:"add"`
}

// addStock adds units to a running (or upcoming) item: the database and the gate together, on
// sale on every node at once.
func (s *Server) addStock(w http.ResponseWriter, r *http.Request) {
	var req AddStockRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	noteTarget(r, id)
	a, err := s.svc.AddStock(r.Context(), id, req.Add)
	s.revised(w, r, a, err)
}

// endActivity ends a sale now, on every node at once.
func (s *Server) endActivity(w http.ResponseWriter, r *http.Request) {
	if err := decodeEmpty(w, r, &struct{}{}); err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	noteTarget(r, id)
	a, err := s.svc.EndActivity(r.Context(), id)
	s.revised(w, r, a, err)
}

// revised answers an operator's change: the activity as it is now, its remaining units as the
// gate counts them (null if the gate is away: the change is made, and reaches it later).
func (s *Server) revised(w http.ResponseWriter, r *http.Request, a sale.Activity, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var rem *int64
	if n, err := s.svc.Remaining(r.Context(), a.ID); err == nil {
		rem = &n
	}
	writeJSON(w, http.StatusOK, publicView(a, rem, rem != nil && *rem == 0, s.svc.Now()))
}
