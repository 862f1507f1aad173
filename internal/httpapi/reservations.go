package httpapi

import (
	"encoding/csv"
	"net/http"
	"strconv"
	"time"

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

// exportReservations streams a reservation sale's reservations as CSV, by number: user, number,
// wave (0 before the close), reserved_at.
func (s *Server) exportReservations(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	a, err := s.svc.Activity(r.Context(), id)
	if err == nil && a.Admission != sale.AdmitReservation {
		err = sale.ErrNotReservable
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="reservations-`+id+`.csv"`)
	cw := csv.NewWriter(w)
	cw.Write([]string{"user", "number", "wave", "reserved_at"})
	err = s.reservations.Each(r.Context(), id, func(res sale.Reservation) error {
		cw.Write([]string{csvSafe(res.UserID), strconv.FormatInt(res.Number, 10), strconv.FormatInt(res.Wave, 10),
			res.ReservedAt.UTC().Format(time.RFC3339Nano)})
		return cw.Error()
	})
	cw.Flush()
	if err != nil {
		s.log.WarnContext(r.Context(), "reservation export cut short", "activity", id, "err", err, "request_id", requestID(w))
	}
}
