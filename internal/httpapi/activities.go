package httpapi

import (
	"bufio"
	"cmp"
	"fmt"
	"net/http"
	"time"

	"seckill/internal/breaker"
	"seckill/internal/httpapi/wire"
	"seckill/internal/sale"
)

func (s *Server) createActivity(w http.ResponseWriter, r *http.Request) {
	var req wire.CreateActivityRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	a, err := activityOf(req)
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
	writeJSON(w, http.StatusCreated, wire.CreatedResponse{ID: a.ID})
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
func lineView(a sale.Activity, st sale.LineState) *wire.LineResponse {
	v := &wire.LineResponse{AdmitRate: a.AdmitRate, QueueCap: a.QueueCap, Joined: st.Joined, Waiting: st.Waiting(),
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
func publicView(a sale.Activity, rem *int64, soldOut bool, now time.Time) wire.ActivityResponse {
	status := "active"
	switch {
	case now.Before(a.StartAt):
		status = "upcoming"
	case !now.Before(a.EndAt):
		status = "ended"
	case soldOut:
		status = "sold_out"
	}
	return wire.ActivityResponse{
		ID: a.ID, Name: a.Name, Kind: a.Kind, Status: status, Stock: a.Stock, Remaining: rem,
		PriceCents: a.PriceCents, TotalCents: a.TotalCents, Currency: a.Currency, PerUserLimit: a.PerUserLimit,
		StartAt: a.StartAt, EndAt: a.EndAt, PayWindowS: int64(a.PayWindow / time.Second), NowMS: now.UnixMilli(),
		RequireChallenge: a.RequireChallenge, Admission: a.Admission, Revision: a.Revision,
		Reservation: reservationSaleView(a, now),
	}
}

// reservationSaleView is the public view of a reservation sale's terms at now; nil for an
// activity of another admission.
func reservationSaleView(a sale.Activity, now time.Time) *wire.ReservationSaleResponse {
	if a.Admission != sale.AdmitReservation {
		return nil
	}
	v := &wire.ReservationSaleResponse{ReserveFrom: a.ReserveFrom, Waves: a.Waves, WaveIntervalS: int64(a.WaveInterval / time.Second),
		WaveOrder: string(a.WaveOrder), DrawCommitment: a.Seed.Commitment()}
	for k := int64(1); k <= a.Waves; k++ {
		v.WaveOpensAt = append(v.WaveOpensAt, a.WaveOpens(k))
	}
	if !now.Before(a.StartAt) { // the close draws with it: from then anyone may check the draw
		v.DrawSeed = a.Seed.String()
	}
	return v
}

// ratesOf reads the limits given, in the domain's terms (0 is sale.RateOff), per user, per IP and
// global; nil for one left out.
func ratesOf(rl *wire.RateLimitsRequest) ([3]*int64, error) {
	var out [3]*int64
	for i, r := range []struct {
		name string
		in   *int64
	}{{"per_user", rl.PerUser}, {"per_ip", rl.PerIP}, {"global", rl.Global}} {
		switch {
		case r.in == nil:
		case *r.in < 0 || *r.in > sale.MaxRate:
			return out, fmt.Errorf("%w: rate_limits.%s must be between 0 (off) and %d requests per second", sale.ErrInvalid, r.name, sale.MaxRate)
		case *r.in == 0:
			off := int64(sale.RateOff)
			out[i] = &off
		default:
			out[i] = r.in
		}
	}
	return out, nil
}

// DefaultPayWindow applies when a create request names none.
const DefaultPayWindow = wire.DefaultPayWindowS * time.Second

// payWindow is pay_window_s as a duration. One out of range stays out of range (0, or just over
// sale.MaxPayWindow), for sale.Activity.Validate to refuse with the rule's one message, and a
// huge one cannot overflow into a valid window.
func payWindow(seconds int64) time.Duration {
	if seconds > int64(sale.MaxPayWindow/time.Second) {
		return sale.MaxPayWindow + time.Second
	}
	return time.Duration(max(seconds, 0)) * time.Second
}

// activityOf turns a create request into a domain activity; sale.Activity.Validate checks the rest.
func activityOf(c wire.CreateActivityRequest) (sale.Activity, error) {
	bad := func(msg string) (sale.Activity, error) {
		return sale.Activity{}, fmt.Errorf("%w: %s", sale.ErrInvalid, msg)
	}
	a := sale.Activity{
		Name:        c.Name,
		Kind:        sale.Kind(c.Kind),
		PriceCents:  c.PriceCents,
		Currency:    c.Currency,
		TotalCents:  c.TotalCents,
		PayWindow:   DefaultPayWindow,
		Admission:   sale.Admission(c.Admission),
		StockShards: c.StockShards,
		QueueCap:    c.QueueCap,
		AdmitRate:   c.AdmitRate,
		Waves:       c.Waves,
		WaveOrder:   sale.WaveOrder(c.WaveOrder),

		RequireChallenge: c.RequireChallenge,
	}
	if a.Kind == "" {
		a.Kind = sale.KindItem
	}
	switch {
	case a.Kind == sale.KindRedPacket && c.Count == nil:
		return bad("count is required for a red packet")
	case a.Kind == sale.KindRedPacket && c.Stock != nil && *c.Stock != *c.Count:
		return bad("stock and count differ; a red packet needs only count")
	case a.Kind == sale.KindRedPacket:
		a.Stock = *c.Count
	case c.Count != nil:
		return bad("count is for red packets; items have stock")
	case c.Stock == nil:
		return bad("stock is required")
	default:
		a.Stock = *c.Stock
	}
	if c.PerUserLimit != nil {
		// The domain's zero is "the default": a 0 given is out of range, for Validate to refuse.
		a.PerUserLimit = cmp.Or(*c.PerUserLimit, -1)
	}
	if c.PayWindowS != nil {
		a.PayWindow = payWindow(*c.PayWindowS)
	}
	if c.RateLimits != nil {
		rs, err := ratesOf(c.RateLimits)
		if err != nil {
			return sale.Activity{}, err
		}
		for i, out := range []*int64{&a.Rates.PerUser, &a.Rates.PerIP, &a.Rates.Global} {
			if rs[i] != nil {
				*out = *rs[i]
			}
		}
	}
	var err error
	if c.StartAt == "" || c.EndAt == "" {
		return bad("start_at and end_at are required (RFC 3339)")
	}
	if a.StartAt, err = time.Parse(time.RFC3339, c.StartAt); err != nil {
		return bad("start_at must be an RFC 3339 time")
	}
	if a.EndAt, err = time.Parse(time.RFC3339, c.EndAt); err != nil {
		return bad("end_at must be an RFC 3339 time")
	}
	if c.ReserveFrom != "" {
		if a.ReserveFrom, err = time.Parse(time.RFC3339, c.ReserveFrom); err != nil {
			return bad("reserve_from must be an RFC 3339 time")
		}
	}
	if c.WaveIntervalS < 0 || c.WaveIntervalS > int64(sale.MaxWaveInterval/time.Second) {
		return bad(fmt.Sprintf("wave_interval_s must be between 1 and %d", int64(sale.MaxWaveInterval/time.Second)))
	}
	a.WaveInterval = time.Duration(c.WaveIntervalS) * time.Second
	return a, nil
}

// activities lists the activities that have not ended, from the node's cache: the front page's
// data, which costs no query however many visitors load it.
func (s *Server) activities(w http.ResponseWriter, r *http.Request) {
	now := s.svc.Now()
	acts := s.svc.Current()
	out := make([]wire.ActivityResponse, 0, len(acts))
	for _, a := range acts {
		out = append(out, publicView(a, nil, s.svc.SoldOut(a.ID), now))
	}
	writeJSON(w, http.StatusOK, wire.PublicActivitiesResponse{Activities: out, NowMS: now.UnixMilli()})
}
