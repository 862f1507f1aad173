package bench

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/url"
	"sync"
	"time"

	"seckill/internal/httpapi/wire"
	"seckill/internal/sale"
)

// A reservation sale's run (--admission reservation): the first Reserved of the crowd's users
// reserve before the start. At each wave's opening its reservers click (all at once, or spread
// over --arrival ramp:D), and so do the next wave's, early, as a script would (the page keeps
// their button shut): they must be told to wait. The users who did not reserve click at the
// first opening, and must all be refused. A reserver of the wave, or a stranger, told to wait
// (the waves are being given to the gate) clicks again a second later, as the page does. Of the
// reservers, a share --show come at all. The checker holds the sale's own invariants and the admission's: no grab
// of a user who did not reserve taken, none before its wave, no reserver refused as not
// reserved. The server's forecast of the crowd, asked once the reservations are in, is held to
// what the crowd did; once checked, the sale is ended, so that it is archived and kept in the
// history later forecasts fit from.

// AdmitReservation is the reservation sale's admission.
const AdmitReservation = "reservation"

// ReservationSpec is a reservation run's reservations and waves.
type ReservationSpec struct {
	Reserved     int   // the users who reserve: the crowd's first Reserved
	Waves        int64 // 1 to sale.MaxWaves
	WaveInterval time.Duration
	// Show is the share of the reservers who come to the sale (drawn from the seed); 0: all.
	Show float64
}

// shows reports whether the reserver i comes to the sale: a share Show of them, drawn from
// the crowd's seed.
func (s Sale) shows(i int) bool {
	show := s.Reservation.Show
	if show <= 0 || show >= 1 {
		return true
	}
	h := fnv.New64a()
	fmt.Fprint(h, s.Seed, "/", i)
	return float64(h.Sum64()%1_000_000) < show*1_000_000
}

// reservationSlack is how long after its last wave opens a reservation run's crowd may still
// click (the reservers told to wait try again for up to 30 rounds of a second).
const reservationSlack = 30 * time.Second

// The outcomes of a reservation sale's refusals.
const (
	NotReserved Outcome = "not_reserved"
	WaveNotOpen Outcome = "wave_not_open"
)

// Validate reports a reservation run that cannot be made, for a crowd of users.
func (r ReservationSpec) Validate(users int) error {
	switch {
	case r.Reserved < 1 || r.Reserved > users:
		return fmt.Errorf("--reserved %d: want 1 to --users (%d)", r.Reserved, users)
	case r.Waves < 1 || r.Waves > sale.MaxWaves:
		return fmt.Errorf("--waves %d: want 1 to %d", r.Waves, sale.MaxWaves)
	case r.Waves > 1 && (r.WaveInterval < time.Second || r.WaveInterval%time.Second != 0 || r.WaveInterval > time.Minute):
		return fmt.Errorf("--wave-interval %s: want whole seconds from 1s to 1m with several waves", r.WaveInterval)
	case r.Waves == 1 && r.WaveInterval != 0:
		return errors.New("--wave-interval is for more than one wave")
	case !(r.Show >= 0 && r.Show <= 1):
		return fmt.Errorf("--show %g: want the share of the reservers who come, 0 to 1 (0: all)", r.Show)
	}
	return nil
}

// ReservationReport is what a reservation run found. Every field named after a violation is
// zero in a correct run.
type ReservationReport struct {
	Reserved  int64    `json:"reserved"`  // reservations acknowledged
	Closed    int64    `json:"closed"`    // refused RESERVATIONS_CLOSED: the start came first
	ReserveS  float64  `json:"reserve_s"` // the reservations' time
	OpenS     float64  `json:"open_s"`    // from the start until the first wave's first unit
	Waves     []Wave   `json:"waves"`     // per wave
	Strangers int64    `json:"strangers"` // grabs of users who did not reserve, all refused
	Waited    int64    `json:"waited"`    // clicks told to wait while the waves were being given
	Numbering int64    `json:"numbering"` // reservations whose numbers are not 1..n each once
	Stranger  int64    `json:"stranger"`  // grabs taken from users who did not reserve
	Early     int64    `json:"early"`     // grabs taken before their user's wave opened
	Refused   int64    `json:"refused"`   // reservers refused NOT_RESERVED
	WavesOff  int64    `json:"waves_off"` // reservers whose wave is not the one their number gives
	Problems  []string `json:"problems,omitempty"`
	// Forecast is the server's forecast of the crowd, asked once the reservations were in,
	// beside what the crowd did; nil when the server gave none.
	Forecast *ForecastReport `json:"forecast,omitempty"`
}

// ForecastReport holds a reservation sale's forecast (GET .../forecast, before the start) to
// the crowd the run sent: the reservers who clicked, every click from the start on (the
// strangers' too: the load), and the most of them sent in one second. PeakError is the
// forecast's peak off the measured one, as a share of it (+0.1: 10 % too high).
type ForecastReport struct {
	Basis           string  `json:"basis"`
	Sales           int     `json:"sales"`
	ExpectedBuyers  int64   `json:"expected_buyers"`
	ExpectedClicks  int64   `json:"expected_clicks"`
	ExpectedPeakRPS float64 `json:"expected_peak_rps"`
	Buyers          int64   `json:"buyers"`
	Clicks          int64   `json:"clicks"`
	PeakRPS         int64   `json:"peak_rps"`
	PeakError       float64 `json:"peak_error"`
}

// measure fills in what the crowd did: the history's requests sent from start on, per second,
// and the reservers (those in reserved) among their users.
func (f *ForecastReport) measure(history []Record, reserved map[string]int64, start time.Time) {
	buyers := map[string]bool{}
	perSecond := map[int64]int64{}
	for _, r := range history {
		if r.NotSent || r.Start < start.UnixMicro() {
			continue
		}
		if _, ok := reserved[r.User]; ok {
			buyers[r.User] = true
		}
		f.Clicks++
		sec := (r.Start - start.UnixMicro()) / 1e6
		perSecond[sec]++
		f.PeakRPS = max(f.PeakRPS, perSecond[sec])
	}
	f.Buyers = int64(len(buyers))
	if f.PeakRPS > 0 {
		f.PeakError = f.ExpectedPeakRPS/float64(f.PeakRPS) - 1
	}
}

// Wave is one wave's reservers and what they took.
type Wave struct {
	Reserved int64 `json:"reserved"`
	Won      int64 `json:"won"`
}

// OK reports whether the admission's invariants held.
func (r ReservationReport) OK() bool {
	return r.Numbering+r.Stranger+r.Early+r.Refused+r.WavesOff == 0
}

// runReservation runs a reservation sale (see the top of this file).
func (s Sale) runReservation(ctx context.Context, c *Client, bearer func(int) string) (Result, []Record, error) {
	rs := s.Reservation
	// The sale is created to start in an hour; once the reservations are in, the operator moves
	// the start to a moment away (an edit the API takes before the start), so that the run does
	// not depend on how fast the server takes reservations.
	later := time.Now().UTC().Add(time.Hour).Truncate(time.Second)
	spec := s.spec(fmt.Sprintf("bench reservation seed %d", s.Seed), later)
	spec.Admission, spec.Waves, spec.WaveIntervalS = AdmitReservation, rs.Waves, int64(rs.WaveInterval/time.Second)
	spec.EndAt = later.Add(time.Duration(rs.Waves-1)*rs.WaveInterval + time.Hour).Format(time.RFC3339)
	id, err := c.CreateActivity(ctx, spec)
	if err != nil {
		return Result{}, nil, err
	}
	rep := ReservationReport{}
	path := "/api/activities/" + url.PathEscape(id) + "/reservations"
	began := time.Now()
	numbers, err := s.each(ctx, rs.Reserved, func(i int) (wire.ReservationResponse, error) {
		var v wire.ReservationResponse
		err := c.do(ctx, http.MethodPost, path, bearer(i), nil, http.StatusCreated, &v)
		var ae *apiError
		if errors.As(err, &ae) && ae.Code == wire.CodeReservationsClosed {
			return v, nil // the start came first: not reserved
		}
		return v, err
	})
	if err != nil {
		return Result{}, nil, fmt.Errorf("reserve: %w", err)
	}
	rep.ReserveS = time.Since(began).Seconds()
	reserved := map[string]int64{} // user -> number
	for i, v := range numbers {
		if v.Number == 0 {
			rep.Closed++
			continue
		}
		reserved[s.User(i)] = v.Number
	}
	rep.Reserved = int64(len(reserved))
	byNumber := map[int64]bool{}
	for _, n := range reserved {
		byNumber[n] = true
	}
	for n := int64(1); n <= rep.Reserved; n++ {
		if !byNumber[n] {
			rep.problem(&rep.Numbering, "no reservation has number %d of %d", n, rep.Reserved)
		}
	}
	var fc wire.ForecastResponse
	if err := c.do(ctx, http.MethodGet, "/api/admin/activities/"+url.PathEscape(id)+"/forecast", c.admin, nil, http.StatusOK, &fc); err == nil {
		rep.Forecast = &ForecastReport{Basis: fc.Basis, Sales: fc.Model.Sales, ExpectedBuyers: fc.ExpectedBuyers,
			ExpectedClicks: fc.ExpectedClicks, ExpectedPeakRPS: fc.ExpectedPeakRPS}
	}
	start := time.Now().UTC().Add(time.Second).Truncate(time.Second).Add(time.Second)
	edit := wire.EditActivityRequest{StartAt: &start}
	if err := c.do(ctx, http.MethodPatch, "/api/admin/activities/"+url.PathEscape(id), c.admin, edit, http.StatusOK, nil); err != nil {
		return Result{}, nil, fmt.Errorf("move the start: %w", err)
	}
	select {
	case <-ctx.Done():
		return Result{}, nil, ctx.Err()
	case <-time.After(time.Until(start)):
	}

	waves := Waves{Start: start, Count: rs.Waves, Interval: rs.WaveInterval}
	wave := func(u string) int64 { return waves.of(reserved, u) }
	opens := waves.opens
	index := make(map[string]int32, s.Users)
	for i := range s.Users {
		index[s.User(i)] = int32(i)
	}
	var history []Record
	burst := s.Crowd
	burst.Ramp = 0
	var coming []int32 // the strangers, and the reservers who come
	for i := range s.Users {
		if _, ok := reserved[s.User(i)]; !ok || s.shows(i) {
			coming = append(coming, int32(i))
		}
	}
	for k := int64(1); k <= rs.Waves; k++ {
		select {
		case <-ctx.Done():
			return Result{}, history, ctx.Err()
		case <-time.After(time.Until(opens(k))):
		}
		var clicks []int32 // the crowd at opening k (see the top of this file)
		for _, i := range coming {
			if w := wave(s.User(int(i))); w == 0 && k == 1 || w == k || w == k+1 {
				clicks = append(clicks, i)
			}
		}
		clicks = s.Shuffled(clicks, uint64(k))
		for round := 0; len(clicks) > 0 && round < 30; round++ {
			crowd := s.Crowd // at an opening as the crowd arrives (--arrival), told to wait at once
			if round > 0 {
				time.Sleep(time.Second) // as the answer's Retry-After says
				crowd = burst
			}
			got := Run(ctx, c, id, crowd, clicks, bearer, nil)
			clicks = clicks[:0]
			for i := range got {
				r := &got[i]
				switch r.Code {
				case wire.CodeNotReserved:
					r.Outcome = NotReserved
				case wire.CodeWaveNotOpen:
					r.Outcome = WaveNotOpen
					switch wave(r.User) {
					case k: // its own wave: the gate had not the waves yet
						rep.Waited++
						clicks = append(clicks, index[r.User])
					case 0: // a stranger told to wait while the gate took the waves: it asks again
						clicks = append(clicks, index[r.User])
					}
				}
			}
			history = append(history, got...)
		}
	}
	if err := s.drain(ctx, c, id); err != nil {
		return Result{}, history, err
	}

	users := make([]int, 0, len(reserved))
	for i := range rs.Reserved {
		if _, ok := reserved[s.User(i)]; ok {
			users = append(users, i)
		}
	}
	views, err := s.each(ctx, len(users), func(j int) (wire.ReservationResponse, error) {
		var v wire.ReservationResponse
		err := c.do(ctx, http.MethodGet, path+"/me", bearer(users[j]), nil, http.StatusOK, &v)
		return v, err
	})
	if err != nil {
		return Result{}, history, fmt.Errorf("read the reservations back: %w", err)
	}
	seen := map[string]wire.ReservationResponse{}
	for j, v := range views {
		seen[s.User(users[j])] = v
	}
	rep.check(history, waves, reserved, seen)
	if rep.Forecast != nil {
		rep.Forecast.measure(history, reserved, start)
	}

	facts, err := s.facts(ctx, c, id, history, bearer)
	if err != nil {
		return Result{}, history, err
	}
	v := Check(history, facts)
	// The operator ends the sale once its crowd is checked, so that it is archived (after the
	// server's SECKILL_ARCHIVE_AFTER) and its crowd kept in the history later forecasts fit from.
	if err := c.do(ctx, http.MethodPost, "/api/admin/activities/"+url.PathEscape(id)+"/end", c.admin, struct{}{}, http.StatusOK, nil); err != nil {
		return Result{}, history, fmt.Errorf("end the sale: %w", err)
	}
	return Result{Verdict: v, Load: Summarize(history), OK: v.OK() && rep.OK(), Activity: id, Reservation: &rep}, history, nil
}

// Waves are a reservation sale's waves as bench made them.
type Waves struct {
	Start    time.Time
	Count    int64
	Interval time.Duration
}

// opens is when wave k opens.
func (w Waves) opens(k int64) time.Time { return w.Start.Add(time.Duration(k-1) * w.Interval) }

// of is the wave of user u among the reserved (user -> number; 0 for one not reserved): in the
// order of reservation.
func (w Waves) of(reserved map[string]int64, u string) int64 {
	if n, ok := reserved[u]; ok {
		return sale.WaveOf(n-1, int64(len(reserved)), w.Count)
	}
	return 0
}

// check holds the history's grabs and the server's reservations (seen, user -> what GET
// .../reservations/me answered) to the admission: nothing taken from a user who did not
// reserve, nor before the user's wave, no reserver refused as not reserved, each reservation
// in the wave its number gives, opening when that wave does.
func (r *ReservationReport) check(history []Record, w Waves, reserved map[string]int64, seen map[string]wire.ReservationResponse) {
	r.Waves = make([]Wave, w.Count)
	for u := range reserved {
		r.Waves[w.of(reserved, u)-1].Reserved++
	}
	for _, rec := range history {
		k := w.of(reserved, rec.User)
		switch {
		case k == 0 && rec.Outcome != Won:
			r.Strangers++
		case k == 0:
			r.Strangers++
			r.problem(&r.Stranger, "%s, who did not reserve, took %s", rec.User, rec.Token)
		case rec.Outcome == Won && rec.End < w.opens(k).UnixMicro():
			r.problem(&r.Early, "%s of wave %d took %s at %s, before the wave opened at %s", rec.User, k, rec.Token,
				time.UnixMicro(rec.End).UTC().Format(time.RFC3339Nano), w.opens(k).Format(time.RFC3339))
		case rec.Outcome == NotReserved:
			r.problem(&r.Refused, "%s, reservation %d, was refused as not reserved", rec.User, reserved[rec.User])
		}
		if rec.Outcome == Won && k > 0 {
			r.Waves[k-1].Won++
			if at := float64(rec.End-w.Start.UnixMicro()) / 1e6; r.OpenS == 0 || at < r.OpenS {
				r.OpenS = at
			}
		}
	}
	for _, u := range sortedKeys(reserved) {
		v, k := seen[u], w.of(reserved, u)
		if v.Wave == nil || *v.Wave != k || v.Number != reserved[u] || v.OpensAt == nil || !v.OpensAt.Equal(w.opens(k)) {
			r.problem(&r.WavesOff, "%s's reservation reads number %d, wave %v, opening %v; want number %d in wave %d at %s",
				u, v.Number, deref(v.Wave), v.OpensAt, reserved[u], k, w.opens(k).Format(time.RFC3339))
		}
	}
}

// deref is *p, or 0 for nil.
func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// problem counts one violation in n and says what it was, up to a bound.
func (r *ReservationReport) problem(n *int64, format string, args ...any) {
	*n++
	if len(r.Problems) < maxProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// each calls fn for 0..n-1 on the crowd's concurrency (at most 32 at once) and returns the
// answers in order; the first error stops it.
func (s Sale) each(ctx context.Context, n int, fn func(i int) (wire.ReservationResponse, error)) ([]wire.ReservationResponse, error) {
	out := make([]wire.ReservationResponse, n)
	work := make(chan int)
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for range min(max(s.Concurrency, 1), 32) {
		wg.Go(func() {
			for i := range work {
				v, err := fn(i)
				mu.Lock()
				out[i] = v
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return out, firstErr
}
