package sale

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Reservation admission (预约制): buyers reserve before the sale, from ReserveFrom until it starts,
// and enter in waves: the reservers split into Waves equal waves in WaveOrder, wave k opening at
// StartAt + (k-1) × WaveInterval. A grab is taken only from a reserver whose wave is open.
//
// This file holds what the rest is built on: the reservations, their numbers and waves, and the
// store that keeps them. The admission is not yet one an activity may be created with: the gates
// do not hold the reserved set yet (issue 38).

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

// MaxWaves bounds an activity's waves.
const MaxWaves = 100

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

// WaveOf is the wave, from 1, of the reserver at place i (from 0) of the wave order among n
// reservers split into waves: the first ⌈n/waves⌉ in wave 1, and so on, so that the waves are
// equal but for the last ones, which may be smaller (or empty, with fewer reservers than waves).
func WaveOf(i, n, waves int64) int64 {
	if waves < 1 || n < 1 {
		return 1
	}
	size := (n + waves - 1) / waves
	return i/size + 1
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
}

// The refusals of a reservation.
var (
	// ErrNotReservable says the activity is not a reservation sale.
	ErrNotReservable = errors.New("the activity takes no reservations")
	// ErrReservationsClosed says the reservations closed: the sale has started.
	ErrReservationsClosed = errors.New("the reservations are closed")
	// ErrReservationsNotOpen says the reservations have not opened yet.
	ErrReservationsNotOpen = errors.New("the reservations are not open yet")
	// ErrNotReserved says the buyer has no reservation of the activity.
	ErrNotReserved = errors.New("not reserved")
)

// Reservations are the reservation sales' reservations: a feature of its own on the
// ReservationStore, beside the core service it reads the activities through.
type Reservations struct {
	core  *Service
	store ReservationStore
}

// NewReservations returns the reservations of core's activities, kept by store.
func NewReservations(core *Service, store ReservationStore) *Reservations {
	return &Reservations{core: core, store: store}
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
// ErrNotReservable, ErrNotReserved, ErrBusy.
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
		return Reservation{}, fmt.Errorf("%s of %s: %w", userID, id, ErrNotReserved)
	}
	return r, err
}

// Close assigns the waves of activity a's reservations once they have closed, batch
// reservations at a time: in the order of reservation a page's waves follow from its numbers
// and the count; drawn, the draw needs every reserver's user id (a million take some 40 MB),
// then the waves are written batch at a time. It may run again (after a crash): it assigns the
// same waves. It returns how many it assigned. Errors: ErrNotReservable, ErrInvalidState (the
// reservations are still open), ErrBusy.
func (s *Reservations) Close(ctx context.Context, a Activity, batch int) (int64, error) {
	switch {
	case a.Admission != AdmitReservation:
		return 0, fmt.Errorf("activity %s: %w", a.ID, ErrNotReservable)
	case s.core.now().Before(a.StartAt):
		return 0, fmt.Errorf("%w: the reservations of %s close at its start", ErrInvalidState, a.ID)
	}
	n, err := s.store.Reserved(ctx, a.ID)
	if err != nil {
		return 0, err
	}
	waves := max(a.Waves, 1)
	if a.WaveOrder != WaveDrawn {
		var done int64
		for after := int64(0); ; {
			page, err := s.store.Reservations(ctx, a.ID, after, batch)
			if err != nil || len(page) == 0 {
				return done, err
			}
			set := make(map[int64]int64, len(page))
			for _, r := range page {
				set[r.Number] = WaveOf(r.Number-1, n, waves)
			}
			if err := s.store.SetWaves(ctx, a.ID, set); err != nil {
				return done, err
			}
			done += int64(len(page))
			after = page[len(page)-1].Number
		}
	}
	var all []Reservation
	for after := int64(0); ; {
		page, err := s.store.Reservations(ctx, a.ID, after, batch)
		if err != nil {
			return 0, err
		}
		if len(page) == 0 {
			break
		}
		for _, r := range page { // only what the draw needs
			all = append(all, Reservation{UserID: r.UserID, Number: r.Number})
		}
		after = page[len(page)-1].Number
	}
	assigned := AssignWaves(a, all)
	numbers := slices.Sorted(maps.Keys(assigned))
	for chunk := range slices.Chunk(numbers, max(batch, 1)) {
		set := make(map[int64]int64, len(chunk))
		for _, num := range chunk {
			set[num] = assigned[num]
		}
		if err := s.store.SetWaves(ctx, a.ID, set); err != nil {
			return 0, err
		}
	}
	return int64(len(all)), nil
}
