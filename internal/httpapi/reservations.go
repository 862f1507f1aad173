package httpapi

import (
	"net/http"

	"seckill/internal/httpapi/wire"
	"seckill/internal/sale"
)

// reserve reserves a reservation sale for the caller: 201 the first time, 200 with the same
// reservation after. It passes the edge a grab passes (blocks, rate limits), the sold-out flag
// aside: a reservation takes no unit.
func (s *Server) reserve(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	c, _, err := s.edge(w, r, id, true, false)
	if err == nil {
		err = decodeEmpty(w, r, &struct{}{})
	}
	var res sale.Reservation
	var created bool
	if err == nil {
		res, created, err = s.reservations.Reserve(r.Context(), id, c.user)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	s.writeReservation(w, r, status, res)
}

// myReservation answers the caller's reservation of a reservation sale, or 404 NOT_RESERVED.
func (s *Server) myReservation(w http.ResponseWriter, r *http.Request, user string) {
	res, err := s.reservations.Mine(r.Context(), r.PathValue("id"), user)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeReservation(w, r, http.StatusOK, res)
}

// writeReservation answers res, with its wave's opening once it has a wave.
func (s *Server) writeReservation(w http.ResponseWriter, r *http.Request, status int, res sale.Reservation) {
	v := wire.ReservationResponse{ActivityID: res.ActivityID, UserID: res.UserID, Number: res.Number, ReservedAt: res.ReservedAt}
	if res.Wave > 0 {
		a, err := s.svc.Activity(r.Context(), res.ActivityID)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		opens := a.WaveOpens(res.Wave)
		v.Wave, v.OpensAt = &res.Wave, &opens
	}
	writeJSON(w, status, v)
}
