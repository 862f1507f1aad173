package sale

import (
	"context"
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
}
