package httpapi

import (
	"fmt"
	"net/http"

	"seckill/internal/httpapi/wire"
	"seckill/internal/sale"
)

// addStock adds units to a running (or upcoming) item: the database and the gate together, on
// sale on every node at once.
func (s *Server) addStock(w http.ResponseWriter, r *http.Request) {
	var req wire.AddStockRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	noteTarget(r, id)
	a, err := s.operator.AddStock(r.Context(), id, req.Add)
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
	a, err := s.operator.EndActivity(r.Context(), id)
	s.revised(w, r, a, err)
}

// revised answers an operator's change: the activity as it is now, its remaining units as the
// gate counts them (null if the gate is away). 200: the gate has the change, in force on every
// node; 202: the change is made, but the gate had not taken it yet (it is given it as soon as it
// answers; until then a node that has not read it may answer on the old revision).
func (s *Server) revised(w http.ResponseWriter, r *http.Request, c sale.Revised, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var rem *int64
	if n, err := s.svc.Remaining(r.Context(), c.Activity.ID); err == nil {
		rem = &n
	}
	status := http.StatusOK
	if c.Pending {
		status = http.StatusAccepted
	}
	writeJSON(w, status, publicView(c.Activity, rem, rem != nil && *rem == 0, s.svc.Now()))
}

// editActivity changes an activity's terms: anything before its start, its name, end and rate
// limits after.
func (s *Server) editActivity(w http.ResponseWriter, r *http.Request) {
	var req wire.EditActivityRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	noteTarget(r, id)
	e, err := editOf(req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	a, err := s.operator.EditActivity(r.Context(), id, e)
	s.revised(w, r, a, err)
}

// editOf turns an edit request into the domain's edit; sale.Activity.Validate checks the result.
func editOf(e wire.EditActivityRequest) (sale.ActivityEdit, error) {
	out := sale.ActivityEdit{Name: e.Name, PriceCents: e.PriceCents, Stock: e.Stock, PerUserLimit: e.PerUserLimit,
		StartAt: e.StartAt, EndAt: e.EndAt, RequireChallenge: e.RequireChallenge}
	if e.PayWindowS != nil {
		out.PayWindow = new(payWindow(*e.PayWindowS))
	}
	if e.RateLimits != nil {
		rs, err := ratesOf(e.RateLimits)
		if err != nil {
			return out, err
		}
		out.PerUserRate, out.PerIPRate, out.GlobalRate = rs[0], rs[1], rs[2]
	}
	if out == (sale.ActivityEdit{}) {
		return out, fmt.Errorf("%w: nothing to change", sale.ErrInvalid)
	}
	return out, nil
}
