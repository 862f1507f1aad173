package sale

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// Reservation admission (预约制): buyers reserve before the sale, from ReserveFrom until it starts,
// and enter in waves: the reservers split into Waves equal waves in WaveOrder, wave k opening at
// StartAt + (k-1) × WaveInterval. A grab is taken only from a reserver whose wave is open.
//
// The reservations are the database's (ReservationStore), numbered in the order they commit.
// At the start the sale's reservations close and the reservers are split into their waves
// (Reservations.Close, in the database), then copied into the gate with their waves and sealed
// there (Reservations.OpenWaves, the Waves port): from then the gate refuses, in the grab's own
// step, a grab of anyone not reserved (ErrNotReserved) and of a reserver whose wave has not
// opened (WaveNotOpen). Until the gate holds the whole set every grab waits (WaveNotOpen with
// no opening: a second), so that no reserver is ever refused for a copy not made yet.

// AdmitReservation is the admission of reserved buyers, in waves.
const AdmitReservation Admission = "reservation"

// WaveOrder is the order the reservers are split into waves in.
type WaveOrder string

// The wave orders.
const (
	// WaveByNumber puts the first reservers in the first wave: the order of reservation.
	WaveByNumber WaveOrder = "reserved"
	// WaveDrawn draws the order at the close, verifiably, as the lottery draws (DrawOrder over
	// the reservers' user ids, with the activity's seed, whose commitment is public from the
	// creation).
	WaveDrawn WaveOrder = "random"
)

// MaxWaves bounds an activity's waves, and MaxWaveInterval the time between two.
const (
	MaxWaves        = 100
	MaxWaveInterval = 7 * 24 * time.Hour
)

// Reservation is a buyer's reservation of an activity.
type Reservation struct {
	ActivityID, UserID string
	// Number is the reservation's place in the order of reservation, from 1.
	Number     int64
	ReservedAt time.Time
	// Wave is the wave the reserver enters in, from 1; 0 until the reservations close.
	Wave int64
}

// WaveOpens is when wave k (from 1) of activity a opens.
func (a Activity) WaveOpens(k int64) time.Time {
	return a.StartAt.Add(time.Duration(k-1) * a.WaveInterval)
}

// validateWaves reports what is wrong with a's reservation settings, wrapped in ErrInvalid: a
// reservation sale's reservations open before its start, it has 1 to MaxWaves waves, an
// interval between them when there are several, and its last wave opens before its end;
// another admission has none of them.
func (a Activity) validateWaves() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
	}
	if a.Admission != AdmitReservation {
		if !a.ReserveFrom.IsZero() || a.Waves != 0 || a.WaveInterval != 0 || a.WaveOrder != "" {
			return bad("reserve_from, waves, wave_interval_s and wave_order are for reservation admission")
		}
		return nil
	}
	switch {
	case a.ReserveFrom.IsZero() || !a.ReserveFrom.Before(a.StartAt):
		return bad("reserve_from must be before start_at")
	case a.Waves < 1 || a.Waves > MaxWaves:
		return bad("waves must be between 1 and %d", MaxWaves)
	case a.Waves > 1 && (a.WaveInterval < time.Second || a.WaveInterval > MaxWaveInterval):
		return bad("wave_interval_s is required with more than one wave, between 1 and %d", int64(MaxWaveInterval/time.Second))
	case a.Waves == 1 && a.WaveInterval != 0:
		return bad("wave_interval_s is for more than one wave")
	case a.WaveInterval%time.Second != 0:
		return bad("wave_interval_s is a whole number of seconds")
	case !a.WaveOpens(a.Waves).Before(a.EndAt):
		return bad("the last wave must open before end_at: start_at + (waves-1) × wave_interval_s")
	case a.WaveOrder != WaveByNumber && a.WaveOrder != WaveDrawn:
		return bad("wave_order must be %q or %q", WaveByNumber, WaveDrawn)
	}
	return nil
}

// WaveSize is how many of n reservers split into waves enter in wave k (see WaveOf).
func WaveSize(k, n, waves int64) int64 {
	if waves < 1 || n < 1 || k < 1 {
		return 0
	}
	size := fullWave(n, waves)
	return min(max(n-(k-1)*size, 0), size)
}

// fullWave is the size of the first waves of n reservers split into waves (n, waves ≥ 1): ⌈n/waves⌉.
func fullWave(n, waves int64) int64 { return (n + waves - 1) / waves }

// WaveOf is the wave, from 1, of the reserver at place i (from 0) of the wave order among n
// reservers split into waves: the first ⌈n/waves⌉ in wave 1, and so on, so that the waves are
// equal but for the last ones, which may be smaller (or empty, with fewer reservers than waves).
func WaveOf(i, n, waves int64) int64 {
	if waves < 1 || n < 1 {
		return 1
	}
	return i/fullWave(n, waves) + 1
}

// AssignWaves returns the wave of each of the reservations rs of activity a (all of them, in
// any order), by number: in the order of reservation, or in the draw's order of the reservers'
// user ids with a's seed (WaveDrawn), which anyone can recompute from the seed, once revealed,
// and the list of reservers.
func AssignWaves(a Activity, rs []Reservation) map[int64]int64 {
	n := int64(len(rs))
	waves := max(a.Waves, 1)
	out := make(map[int64]int64, n)
	if a.WaveOrder != WaveDrawn {
		byNumber := make([]int64, 0, n)
		for _, r := range rs {
			byNumber = append(byNumber, r.Number)
		}
		slices.Sort(byNumber)
		for i, num := range byNumber {
			out[num] = WaveOf(int64(i), n, waves)
		}
		return out
	}
	number := make(map[string]int64, n)
	users := make([]string, 0, n)
	for _, r := range rs {
		number[r.UserID] = r.Number
		users = append(users, r.UserID)
	}
	for i, u := range DrawOrder(a.Seed, users) {
		out[number[u]] = WaveOf(int64(i), n, waves)
	}
	return out
}

// ReservationStore keeps the reservations: the database's, written before a reservation is
// answered.
type ReservationStore interface {
	// Reserve records userID's reservation of activity at now, numbered after the activity's
	// last, and returns it with created true; a user who reserved before gets that reservation
	// back, created false. Errors: ErrNotFound (no such activity).
	Reserve(ctx context.Context, activityID, userID string, now time.Time) (r Reservation, created bool, err error)

	// Reservation returns userID's reservation of activity. Errors: ErrNotFound.
	Reservation(ctx context.Context, activityID, userID string) (Reservation, error)

	// Reservations lists up to limit reservations of activity numbered after after, by number.
	Reservations(ctx context.Context, activityID string, after int64, limit int) ([]Reservation, error)

	// SetWaves records the waves of activity's reservations, by number. Numbers it does not
	// have are left out.
	SetWaves(ctx context.Context, activityID string, waves map[int64]int64) error

	// Reserved returns how many reserved activity. Errors: ErrNotFound (no such activity).
	Reserved(ctx context.Context, activityID string) (int64, error)

	// CloseReservations closes activity's reservations: from then Reserve refuses with
	// ErrReservationsClosed, whatever the clock of the node that asks. It returns how many
	// reserved, and whether their waves are recorded whole (WavesAssigned). Closing again
	// returns the same. Errors: ErrNotFound.
	CloseReservations(ctx context.Context, activityID string) (n int64, assigned bool, err error)

	// WavesAssigned records that every reservation of a closed activity has its wave (SetWaves).
	WavesAssigned(ctx context.Context, activityID string) error

	// RemindWave writes e, the reminder of wave e.Wave.Wave (EventWaveOpening), to the outbox
	// unless the activity's reminders reached that wave already: each wave's reminder is written
	// once, whichever node writes it, however long its event stays in the outbox. It returns
	// whether it wrote it. Errors: ErrNotFound (no such activity).
	RemindWave(ctx context.Context, e Event) (bool, error)

	// WaveStats counts activity's reservers per wave (wave 0: not assigned yet), with those of
	// them who grabbed a unit (have an order) and who hold it (CREATED or PAID), by wave.
	WaveStats(ctx context.Context, activityID string) ([]WaveStats, error)
}

// WaveStats is one wave's reservers, those of them who grabbed a unit and those who hold it
// still (their order CREATED or PAID; not cancelled, expired or refunded).
type WaveStats struct {
	Wave, Reserved, Grabbed, Won int64
}

// ReservationStats is a reservation sale's reservations for its operators: how many reserved,
// and per wave (one wave 0 before the close) the reservers and what they took.
type ReservationStats struct {
	Reserved int64
	Waves    []WaveStats
}

// The refusals of a reservation.
var (
	// ErrNotReservable says the activity is not a reservation sale.
	ErrNotReservable = errors.New("the activity takes no reservations")
	// ErrReservationsClosed says the reservations closed: the sale has started.
	ErrReservationsClosed = errors.New("the reservations are closed")
	// ErrReservationsNotOpen says the reservations have not opened yet.
	ErrReservationsNotOpen = errors.New("the reservations are not open yet")
	// ErrNotReserved refuses a grab of a reservation sale by a buyer who did not reserve it.
	ErrNotReserved = errors.New("not reserved")
	// ErrNoReservation answers a lookup of a buyer's reservation that finds none: the same
	// fact as ErrNotReserved, found rather than refused.
	ErrNoReservation = errors.New("no reservation")
	// ErrWaveNotOpen says the buyer's wave has not opened yet (see WaveNotOpen).
	ErrWaveNotOpen = errors.New("the buyer's wave has not opened yet")
)

// WaveNotOpen is ErrWaveNotOpen with the buyer's wave and when it opens; both zero while the
// gate does not hold the waves yet (they are being assigned and copied, at the start or after
// the gate lost them): then the buyer tries again in a second.
type WaveNotOpen struct {
	Wave    int64
	OpensAt time.Time
}

func (w WaveNotOpen) Error() string {
	if w.Wave == 0 {
		return fmt.Sprintf("%v: the waves are being assigned", ErrWaveNotOpen)
	}
	return fmt.Sprintf("%v: wave %d opens at %s", ErrWaveNotOpen, w.Wave, w.OpensAt.UTC().Format(time.RFC3339))
}

// Unwrap makes a WaveNotOpen an ErrWaveNotOpen.
func (w WaveNotOpen) Unwrap() error { return ErrWaveNotOpen }

// RetryAfter is how long after now the buyer should try again: until the wave opens, at least a
// second (and a second while the waves are being assigned).
func (w WaveNotOpen) RetryAfter(now time.Time) time.Duration {
	return max(w.OpensAt.Sub(now), time.Second)
}

// Admit is the check a gate makes of a grab of userID at now from a, a reservation sale whose
// reserver set it holds whole (sealed) or not yet, where userID has wave (0: not among them):
// nil, ErrNotReserved or WaveNotOpen. Every gate checks it in the grab's own step, after the
// sale's window and before anything is spent or taken.
func (a Activity) Admit(sealed bool, wave int64, now time.Time) error {
	switch {
	case !sealed:
		return WaveNotOpen{}
	case wave < 1:
		return fmt.Errorf("activity %s: %w", a.ID, ErrNotReserved)
	case now.Before(a.WaveOpens(wave)):
		return WaveNotOpen{Wave: wave, OpensAt: a.WaveOpens(wave)}
	}
	return nil
}

// Reservations are the reservation sales' reservations: a feature of its own on the
// ReservationStore, beside the core service it reads the activities through.
type Reservations struct {
	core  *Service
	store ReservationStore
	waves Waves
	stats sync.Map // activity id -> counted

	mu       sync.Mutex
	reminded map[string]int64 // activity id -> the last wave whose reminder is in the outbox
}

// NewReservations returns the reservations of core's activities, kept by store, whose waves
// the gate holds in waves.
func NewReservations(core *Service, store ReservationStore, waves Waves) *Reservations {
	return &Reservations{core: core, store: store, waves: waves, reminded: map[string]int64{}}
}

// reservable returns activity id if it takes reservations now. Errors: ErrNotFound,
// ErrNotReservable, ErrReservationsNotOpen, ErrReservationsClosed.
func (s *Reservations) reservable(ctx context.Context, id string) (Activity, error) {
	a, err := s.core.Activity(ctx, id)
	switch now := s.core.now(); {
	case err != nil:
		return Activity{}, err
	case a.Admission != AdmitReservation:
		return Activity{}, fmt.Errorf("activity %s: %w", id, ErrNotReservable)
	case now.Before(a.ReserveFrom):
		return Activity{}, fmt.Errorf("activity %s: %w until %s", id, ErrReservationsNotOpen, a.ReserveFrom.UTC().Format(time.RFC3339))
	case !now.Before(a.StartAt):
		return Activity{}, fmt.Errorf("activity %s: %w", id, ErrReservationsClosed)
	}
	return a, nil
}

// Reserve reserves activity id for userID, between its ReserveFrom and its start. A buyer who
// reserved before gets that reservation back, created false (their number does not change).
// Errors: ErrInvalid (a bad user id), ErrNotFound, ErrNotReservable, ErrReservationsNotOpen,
// ErrReservationsClosed, ErrBusy.
func (s *Reservations) Reserve(ctx context.Context, id, userID string) (Reservation, bool, error) {
	if !ValidUserID(userID) {
		return Reservation{}, false, BadUserID("user")
	}
	if _, err := s.reservable(ctx, id); err != nil {
		if errors.Is(err, ErrReservationsClosed) { // a buyer who reserved in time still learns their number
			if r, err2 := s.store.Reservation(ctx, id, userID); err2 == nil {
				return r, false, nil
			}
		}
		return Reservation{}, false, err
	}
	return s.store.Reserve(ctx, id, userID, s.core.now())
}

// Mine returns userID's reservation of activity id. Errors: ErrNotFound (no such activity),
// ErrNotReservable, ErrNoReservation, ErrBusy.
func (s *Reservations) Mine(ctx context.Context, id, userID string) (Reservation, error) {
	a, err := s.core.Activity(ctx, id)
	if err != nil {
		return Reservation{}, err
	}
	if a.Admission != AdmitReservation {
		return Reservation{}, fmt.Errorf("activity %s: %w", id, ErrNotReservable)
	}
	r, err := s.store.Reservation(ctx, id, userID)
	if errors.Is(err, ErrNotFound) {
		return Reservation{}, fmt.Errorf("%s of %s: %w", userID, id, ErrNoReservation)
	}
	return r, err
}

// statsFor is how long a reservation sale's stats are served from the last count: a live
// dashboard asks every second, and a count joins every reservation with the orders.
const statsFor = 5 * time.Second

// Stats returns activity id's reservations per wave, counted at most statsFor ago. Errors:
// ErrNotFound, ErrNotReservable, ErrBusy.
func (s *Reservations) Stats(ctx context.Context, id string) (ReservationStats, error) {
	a, err := s.core.Activity(ctx, id)
	if err != nil {
		return ReservationStats{}, err
	}
	if a.Admission != AdmitReservation {
		return ReservationStats{}, fmt.Errorf("activity %s: %w", id, ErrNotReservable)
	}
	now := s.core.now()
	if c, ok := s.stats.Load(id); ok && now.Sub(c.(counted).at) < statsFor {
		return c.(counted).stats, nil
	}
	ws, err := s.store.WaveStats(ctx, id)
	if err != nil {
		return ReservationStats{}, err
	}
	st := ReservationStats{Waves: ws}
	for _, w := range ws {
		st.Reserved += w.Reserved
	}
	s.stats.Store(id, counted{at: now, stats: st})
	return st, nil
}

// counted is a reservation sale's stats and when they were counted.
type counted struct {
	at    time.Time
	stats ReservationStats
}

// Each calls fn with every reservation of activity id, by number, read batch at a time.
// Errors: ErrNotFound, ErrNotReservable, ErrBusy, and fn's, which stops it.
func (s *Reservations) Each(ctx context.Context, id string, fn func(Reservation) error) error {
	a, err := s.core.Activity(ctx, id)
	if err != nil {
		return err
	}
	if a.Admission != AdmitReservation {
		return fmt.Errorf("activity %s: %w", id, ErrNotReservable)
	}
	return s.pages(ctx, id, OpenBatch, func(page []Reservation) error {
		for _, r := range page {
			if err := fn(r); err != nil {
				return err
			}
		}
		return nil
	})
}

// Close closes activity a's reservations in the database (Store.CloseReservations) once it has
// started, and assigns their waves, batch reservations at a time: in the order of reservation a
// page's waves follow from its numbers and the count; drawn, the draw needs every reserver's
// user id (a million take some 40 MB), then the waves are written batch at a time. A close
// that finds the waves assigned writes nothing; one cut off (a crash) is run again and assigns
// the same waves. It returns how many reserved. Errors: ErrNotReservable, ErrInvalidState (the
// reservations are still open), ErrBusy.
func (s *Reservations) Close(ctx context.Context, a Activity, batch int) (int64, error) {
	switch {
	case a.Admission != AdmitReservation:
		return 0, fmt.Errorf("activity %s: %w", a.ID, ErrNotReservable)
	case s.core.now().Before(a.StartAt):
		return 0, fmt.Errorf("%w: the reservations of %s close at its start", ErrInvalidState, a.ID)
	}
	batch = max(batch, 1)
	n, assigned, err := s.store.CloseReservations(ctx, a.ID)
	if err != nil || assigned {
		return n, err
	}
	if err := s.assign(ctx, a, n, batch); err != nil {
		return 0, err
	}
	return n, s.store.WavesAssigned(ctx, a.ID)
}

// assign writes the waves of a's n reservations (see Close).
func (s *Reservations) assign(ctx context.Context, a Activity, n int64, batch int) error {
	waves := max(a.Waves, 1)
	if a.WaveOrder != WaveDrawn {
		return s.pages(ctx, a.ID, batch, func(page []Reservation) error {
			set := make(map[int64]int64, len(page))
			for _, r := range page {
				set[r.Number] = WaveOf(r.Number-1, n, waves)
			}
			return s.store.SetWaves(ctx, a.ID, set)
		})
	}
	var all []Reservation
	err := s.pages(ctx, a.ID, batch, func(page []Reservation) error {
		for _, r := range page { // only what the draw needs
			all = append(all, Reservation{UserID: r.UserID, Number: r.Number})
		}
		return nil
	})
	if err != nil {
		return err
	}
	assigned := AssignWaves(a, all)
	numbers := slices.Sorted(maps.Keys(assigned))
	for chunk := range slices.Chunk(numbers, batch) {
		set := make(map[int64]int64, len(chunk))
		for _, num := range chunk {
			set[num] = assigned[num]
		}
		if err := s.store.SetWaves(ctx, a.ID, set); err != nil {
			return err
		}
	}
	return nil
}

// pages calls fn with the reservations of activity id, batch at a time, in the order of their
// numbers.
func (s *Reservations) pages(ctx context.Context, id string, batch int, fn func([]Reservation) error) error {
	for after := int64(0); ; {
		page, err := s.store.Reservations(ctx, id, after, batch)
		if err != nil || len(page) == 0 {
			return err
		}
		if err := fn(page); err != nil {
			return err
		}
		after = page[len(page)-1].Number
	}
}

// OpenWaves makes the gate hold the waves of activity a, a reservation sale that has started:
// unless the gate holds them whole already, it closes the reservations (Close), copies the
// reservers with their waves into the gate batch at a time, and seals the set there, from when
// the gate admits each reserver in their wave. It is what the sale needs at its start, and again
// whenever the gate lost the set (a node rebuilt, a Redis shard lost): until it is done every
// grab of a waits (WaveNotOpen). Two at once do the same work twice, harmlessly; the node runs
// it under a lease. It returns how many reservers it copied. Errors: those of Close, ErrBusy.
func (s *Reservations) OpenWaves(ctx context.Context, a Activity, batch int) (int64, error) {
	if sealed, err := s.waves.WavesSealed(ctx, a); err != nil || sealed {
		return 0, err
	}
	batch = max(batch, 1)
	n, err := s.Close(ctx, a, batch)
	if err != nil {
		return 0, err
	}
	var copied int64
	err = s.pages(ctx, a.ID, batch, func(page []Reservation) error {
		set := make(map[string]int64, len(page))
		for _, r := range page {
			set[r.UserID] = r.Wave
		}
		copied += int64(len(page))
		return s.waves.HoldWaves(ctx, a, set)
	})
	if err != nil {
		return 0, err
	}
	return copied, s.waves.SealWaves(ctx, a, n)
}

// OpenBatch is how many reservations OpenWaves reads, writes and copies at a time.
const OpenBatch = 5000

// OpenDue opens the waves (OpenWaves) of every reservation sale this node knows that has started
// and not ended, and returns how many reservers it copied into the gate (0 when the gate held
// every set already: one check per activity).
func (s *Reservations) OpenDue(ctx context.Context) (int, error) {
	var copied int64
	var errs []error
	now := s.core.now()
	for _, a := range s.core.Current() {
		if a.Admission != AdmitReservation || now.Before(a.StartAt) || a.Archived() {
			continue
		}
		n, err := s.OpenWaves(ctx, a, OpenBatch)
		if err != nil {
			errs = append(errs, fmt.Errorf("open the waves of %s: %w", a.ID, err))
		}
		copied += n
	}
	return int(copied), errors.Join(errs...)
}

// RemindDue writes the reminders (EventWaveOpening) of the waves of the reservation sales this
// node knows that open within before from now and have not opened yet, each once (the store
// keeps which were written: another node's, or this one's before a restart, are not written
// again), in the order the waves open, and returns how many it wrote. A wave that opened with no
// reminder written (every node was down through its window) gets none: it is no longer news.
// Its reserved are the wave's reservers, or before the close the wave's share of those so far
// (WaveSize).
func (s *Reservations) RemindDue(ctx context.Context, before time.Duration) (int, error) {
	now := s.core.now()
	current := s.core.Current()
	s.mu.Lock()
	known := make(map[string]int64, len(current))
	for _, a := range current {
		known[a.ID] = s.reminded[a.ID]
	}
	s.reminded = known // forget the activities that ended
	s.mu.Unlock()
	written := 0
	var errs []error
	for _, a := range current {
		if a.Admission != AdmitReservation || a.Archived() {
			continue
		}
		n, err := s.remind(ctx, a, known[a.ID], now, before)
		written += n
		if err != nil {
			errs = append(errs, fmt.Errorf("remind the waves of %s: %w", a.ID, err))
		}
	}
	return written, errors.Join(errs...)
}

// remind writes the due reminders of a's waves after wave done (see RemindDue).
func (s *Reservations) remind(ctx context.Context, a Activity, done int64, now time.Time, before time.Duration) (int, error) {
	written := 0
	reserved := int64(-1)
	for k := done + 1; k <= a.Waves; k++ {
		opens := a.WaveOpens(k)
		if !now.Before(opens) {
			continue
		}
		if now.Before(opens.Add(-before)) {
			break // the later waves open later still
		}
		if reserved < 0 {
			n, err := s.store.Reserved(ctx, a.ID)
			if err != nil {
				return written, err
			}
			reserved = n
		}
		e := Event{ID: WaveOpeningID(a.ID, k), Type: EventWaveOpening, At: now, Order: Order{ActivityID: a.ID},
			Wave: &WaveOpening{ActivityID: a.ID, ActivityName: a.Name, Wave: k, OpensAt: opens, Reserved: WaveSize(k, reserved, a.Waves)}}
		sent, err := s.store.RemindWave(ctx, e)
		if err != nil {
			return written, err // the later waves wait: the store would take them as this one's done
		}
		if sent {
			written++
		}
		s.mu.Lock()
		s.reminded[a.ID] = max(s.reminded[a.ID], k)
		s.mu.Unlock()
	}
	return written, nil
}
