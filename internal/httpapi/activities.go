package httpapi

import (
	"bufio"
	"net/http"
	"seckill/internal/breaker"
	"seckill/internal/sale"
	"time"
)

func (s *Server) createActivity(w http.ResponseWriter, r *http.Request) {
	var req CreateActivityRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	a, err := req.Activity()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	a, err = s.svc.CreateActivity(r.Context(), a)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	noteTarget(r, a.ID)
	w.Header().Set("Location", "/api/activities/"+a.ID)
	writeJSON(w, http.StatusCreated, map[string]string{"id": a.ID})
}

// ActivityResponse is the public view of an activity.
type ActivityResponse struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	Kind         sale.Kind `json:"kind"`
	Status       string    `json:"status"` // upcoming, active, sold_out, ended
	Stock        int64     `json:"stock"`
	Remaining    *int64    `json:"remaining"` // approximate: the gate's count when asked; null when shed
	PriceCents   int64     `json:"price_cents,omitempty"`
	TotalCents   int64     `json:"total_cents,omitempty"`
	PerUserLimit int64     `json:"per_user_limit"`
	StartAt      time.Time `json:"start_at"`
	EndAt        time.Time `json:"end_at"`
	PayWindowS   int64     `json:"pay_window_s"`
	NowMS        int64     `json:"now_ms"`
	// RequireChallenge says grabs need a solved challenge's path token.
	RequireChallenge bool `json:"require_challenge"`
	// Admission is direct, queue or lottery; Line describes a queue or lottery's line.
	Admission sale.Admission `json:"admission"`
	Line      *LineResponse  `json:"line,omitempty"`
	// Revision counts the activity's versions: 1 as created, one more for each change an
	// operator made (stock added, the sale ended early).
	Revision int64 `json:"revision"`
}

// LineResponse is the public view of a line. DrawCommitment (the seed's SHA-256) is public from
// the creation; DrawSeed once the early crowd is drawn, with its entries at EntriesURL.
type LineResponse struct {
	AdmitRate      int64   `json:"admit_rate"`
	QueueCap       int64   `json:"queue_cap"`
	Joined         int64   `json:"joined"`
	Waiting        int64   `json:"waiting"`
	Early          int64   `json:"early"`
	Sealed         bool    `json:"sealed"`
	DrainRate      float64 `json:"drain_rate"`
	DrawCommitment string  `json:"draw_commitment"`
	DrawSeed       string  `json:"draw_seed,omitempty"`
	EntriesURL     string  `json:"entries_url,omitempty"`
}

func (s *Server) activity(w http.ResponseWriter, r *http.Request) {
	a, err := s.svc.Activity(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// The remaining count is a courtesy that costs a gate call per page view: a node that is not
	// at level normal sheds it and says sold out only when its local flag knows.
	var rem *int64
	soldOut := s.svc.SoldOut(a.ID)
	if s.health.Level() == breaker.Normal {
		n, err := s.svc.Remaining(r.Context(), a.ID)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		rem, soldOut = &n, n == 0
	}
	view := publicView(a, rem, soldOut, s.svc.Now())
	if a.Lined() {
		st, err := s.lines.LineState(r.Context(), a)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		view.Line = lineView(a, st)
	}
	writeJSON(w, http.StatusOK, view)
}

// lineView is the public view of a's line in state st.
func lineView(a sale.Activity, st sale.LineState) *LineResponse {
	v := &LineResponse{AdmitRate: a.AdmitRate, QueueCap: a.QueueCap, Joined: st.Joined, Waiting: st.Waiting(),
		Early: st.Early, Sealed: st.Sealed, DrainRate: st.Rate, DrawCommitment: a.Seed.Commitment()}
	if st.Drawn {
		v.DrawSeed, v.EntriesURL = a.Seed.String(), "/api/activities/"+a.ID+"/entries"
	}
	return v
}

// entries lists the draw's entries, one token a line, sorted: with the revealed seed anyone
// recomputes the draw (seckill draw).
func (s *Server) entries(w http.ResponseWriter, r *http.Request) {
	a, err := s.svc.Activity(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	tokens, err := s.lines.Entries(r.Context(), a)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=60")
	bw := bufio.NewWriterSize(w, 64<<10)
	for _, t := range tokens {
		bw.WriteString(t)
		bw.WriteByte('\n')
	}
	bw.Flush()
}

// publicView is what anyone may see of activity a at now: rem is the gate's remaining count, or
// nil when it was not asked (soldOut then says what this node's flag knows).
func publicView(a sale.Activity, rem *int64, soldOut bool, now time.Time) ActivityResponse {
	status := "active"
	switch {
	case now.Before(a.StartAt):
		status = "upcoming"
	case !now.Before(a.EndAt):
		status = "ended"
	case soldOut:
		status = "sold_out"
	}
	return ActivityResponse{
		ID: a.ID, Name: a.Name, Kind: a.Kind, Status: status, Stock: a.Stock, Remaining: rem,
		PriceCents: a.PriceCents, TotalCents: a.TotalCents, PerUserLimit: a.PerUserLimit,
		StartAt: a.StartAt, EndAt: a.EndAt, PayWindowS: int64(a.PayWindow / time.Second), NowMS: now.UnixMilli(),
		RequireChallenge: a.RequireChallenge, Admission: a.Admission, Revision: a.Revision,
	}
}
