package httpapi

import (
	"fmt"
	"net/http"
	"strconv"

	"seckill/internal/breaker"
	"seckill/internal/httpapi/wire"
	"seckill/internal/sale"
)

// shedLeaderboard says whether leaderboards are shed now: they are the first non-core feature to
// go, when the database (their fallback, and the sale's final guard) is failing.
func (s *Server) shedLeaderboard(w http.ResponseWriter, r *http.Request) bool {
	if s.health.LevelOf(breaker.Database) < breaker.Degraded {
		return false
	}
	s.writeError(w, r, fmt.Errorf("%w: leaderboards are shed while the database is degraded", sale.ErrBusy))
	return true
}

// leaderboard answers GET /api/activities/{id}/leaderboard?limit=N (1-100, default 10).
func (s *Server) leaderboard(w http.ResponseWriter, r *http.Request) {
	n := 10
	if v := r.URL.Query().Get("limit"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > sale.MaxBoard {
			s.writeError(w, r, fmt.Errorf("%w: limit must be a number from 1 to %d", sale.ErrInvalid, sale.MaxBoard))
			return
		}
	}
	if s.shedLeaderboard(w, r) {
		return
	}
	b, err := s.boards.Leaderboard(r.Context(), r.PathValue("id"), n)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, boardResponse(b))
}

// rank answers GET /api/activities/{id}/rank: the caller's standing.
func (s *Server) rank(w http.ResponseWriter, r *http.Request, user string) {
	if s.shedLeaderboard(w, r) {
		return
	}
	b, err := s.boards.Rank(r.Context(), r.PathValue("id"), user)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, boardResponse(b))
}

func boardResponse(b sale.Board) wire.BoardResponse {
	resp := wire.BoardResponse{Exact: b.Exact, Bound: b.Bound, Strategy: b.Strategy}
	if b.Entries != nil {
		resp.Entries = make([]wire.StandingResponse, len(b.Entries))
	}
	for i, e := range b.Entries {
		resp.Entries[i] = wire.StandingResponse{Rank: e.Rank, UserID: e.UserID, AmountCents: e.AmountCents, GrabbedAt: e.GrabbedAt}
	}
	return resp
}
