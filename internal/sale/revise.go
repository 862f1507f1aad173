package sale

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// An operator changes a running activity (stock added, the sale ended early) by revising it:
// the database stores the new revision and records that the gate is owed it, in one
// transaction; then the gate is given it (Inventory.Revise). A gate that cannot take it at once
// (Redis away) is given it later, by ReviseOwed, or by the first grab that finds it behind (the
// giving is the gate's recovery, recovery.go).
// Every node's copy of the activity may be out of date meanwhile: the gate refuses a grab made
// on another revision than its own (ErrStale), and the node reads the activity again first. So
// a change holds on every node from the moment the gate has it, and not before: a node that has
// not read the change answers on the old revision while the gate holds it too. The operator is
// told which (Revised.Pending), so a change is never said to be in force before it is.

// Revised is an operator's change as made: the activity as the database has it now, and
// Pending if the gate had not taken it when the operator was answered. A pending change is
// made (it is not lost, and not to be made again): the gate is given it as soon as it answers,
// and until then the nodes that have not read it may still answer on the old revision (sold
// out before stock added, a grab won after an end).
type Revised struct {
	Activity Activity
	Pending  bool
}

// Revision is a change of an activity the gate is owed: Add units added to its stock (0 for a
// change the gate keeps nothing of), or, Reload, its state made again from the database's (the
// stock edited before the start, which may shrink it).
type Revision struct {
	ActivityID string
	Revision   int64
	Add        int64
	Reload     bool
	At         time.Time
}

// AddStock adds n units to activity id's stock, in the database and the gate together: they
// go on sale at once on every node, whose sold-out flags are cleared (or, Pending, once the gate
// answers). An item only (a red packet's shares are split once, at its creation), and not once
// it has ended. Errors:
// ErrInvalid, ErrNotFound, ErrInvalidState (ended, or archived), ErrBusy (nothing changed).
func (o *Operator) AddStock(ctx context.Context, id string, n int64) (Revised, error) {
	s := o.core
	return s.revise(ctx, id, func(a Activity) (Activity, Revision, error) {
		switch {
		case a.Kind != KindItem:
			return a, Revision{}, fmt.Errorf("%w: stock is added to items; a red packet's shares are split when it is created", ErrInvalid)
		case n < 1 || n > MaxStock-a.Stock:
			return a, Revision{}, fmt.Errorf("%w: add must be between 1 and %d (the stock is at most %d)", ErrInvalid, MaxStock-a.Stock, MaxStock)
		case !s.now().Before(a.EndAt):
			return a, Revision{}, fmt.Errorf("%w: activity %s has ended", ErrInvalidState, a.ID)
		}
		a.Stock += n
		return a, Revision{Add: n}, nil
	})
}

// EndActivity ends activity id's sale now, on every node at once: grabs are refused with
// ErrEnded from the moment the gate has the revision. Orders already placed keep their payment
// windows. An activity that has not started never opens (its start moves to the end). Errors:
// ErrNotFound, ErrInvalidState (ended already, or archived), ErrBusy.
func (o *Operator) EndActivity(ctx context.Context, id string) (Revised, error) {
	s := o.core
	return s.revise(ctx, id, func(a Activity) (Activity, Revision, error) {
		now := s.now().UTC().Truncate(time.Millisecond)
		if !now.Before(a.EndAt) {
			return a, Revision{}, fmt.Errorf("%w: activity %s has ended", ErrInvalidState, a.ID)
		}
		a.EndAt = now
		if !a.StartAt.Before(a.EndAt) {
			a.StartAt = a.EndAt.Add(-time.Millisecond)
		}
		return a, Revision{}, nil
	})
}

// revise changes activity id by change, which returns the activity changed and what the change
// does to the gate, on the activity as the database has it now; a change that loses the race
// with another is made again on the winner's revision.
func (s *Service) revise(ctx context.Context, id string, change func(Activity) (Activity, Revision, error)) (Revised, error) {
	for attempt := 0; ; attempt++ {
		a, err := s.activities.Activity(ctx, id)
		if err != nil {
			return Revised{}, err
		}
		if a.Archived() {
			return Revised{}, fmt.Errorf("%w: activity %s is archived", ErrInvalidState, id)
		}
		next, rev, err := change(a)
		if err != nil {
			return Revised{}, err
		}
		next.Revision = a.Revision + 1
		if err := next.Validate(); err != nil {
			return Revised{}, err
		}
		switch err := s.activities.ReviseActivity(ctx, next, rev); {
		case errors.Is(err, ErrChanged) && attempt < 3:
			continue
		case err != nil:
			return Revised{}, fmt.Errorf("revise activity %s: %w", id, err)
		}
		s.remember(next)
		// Not on the request's context: an operator who hangs up has still changed it. A gate
		// that fails here, or does not answer within giveWithin, is given the revision later
		// (ReviseOwed): the change is made.
		give, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveWithin)
		err = s.giveRevisions(give, id)
		cancel()
		if err != nil {
			s.event("revision_deferred", 1)
		}
		return Revised{Activity: next, Pending: err != nil}, nil
	}
}

// giveWithin bounds how long an operator's change waits for the gate to take it before it is
// left to the sweepers.
const giveWithin = 2 * time.Second

// ActivityEdit is an operator's change of an activity's terms: each field set is changed.
type ActivityEdit struct {
	Name             *string
	PriceCents       *int64
	Stock            *int64
	PerUserLimit     *int64
	StartAt, EndAt   *time.Time
	PayWindow        *time.Duration
	RequireChallenge *bool
	// The activity's own rate limits (see Rates; RateOff switches one off).
	PerUserRate, PerIPRate, GlobalRate *int64
}

// EditActivity changes the terms of activity id. Before its start anything may change but what
// the sale is built on (its kind, admission, stock shards, a red packet's split, a line's start,
// when its early crowd is drawn); once it has started, only what cannot wrong a buyer who has
// grabbed already: its name, its rate limits and its end (to a time still to come; ending it now
// is EndActivity). The change reaches every node's gate as any revision does. Errors: ErrInvalid,
// ErrNotFound, ErrInvalidState (started, or ended), ErrBusy.
func (o *Operator) EditActivity(ctx context.Context, id string, e ActivityEdit) (Revised, error) {
	s := o.core
	return s.revise(ctx, id, func(a Activity) (Activity, Revision, error) {
		now := s.now()
		started := !now.Before(a.StartAt)
		switch {
		case !now.Before(a.EndAt):
			return a, Revision{}, fmt.Errorf("%w: activity %s has ended", ErrInvalidState, a.ID)
		case started && (e.PriceCents != nil || e.Stock != nil || e.PerUserLimit != nil || e.StartAt != nil ||
			e.PayWindow != nil || e.RequireChallenge != nil):
			return a, Revision{}, fmt.Errorf("%w: activity %s has started: only its name, end_at and rate_limits can change (stock is added with the stock route)",
				ErrInvalidState, a.ID)
		case started && e.EndAt != nil && !e.EndAt.After(now):
			return a, Revision{}, fmt.Errorf("%w: end_at must be still to come; to end the sale now, end it", ErrInvalid)
		case e.Stock != nil && a.Kind != KindItem:
			return a, Revision{}, fmt.Errorf("%w: a red packet's count is split when it is created", ErrInvalid)
		case e.PriceCents != nil && a.Kind != KindItem:
			return a, Revision{}, fmt.Errorf("%w: a red packet has no price", ErrInvalid)
		case e.StartAt != nil && a.Lined():
			return a, Revision{}, fmt.Errorf("%w: a line's start is when its early crowd is drawn: it cannot move", ErrInvalid)
		}
		var rev Revision
		if e.Name != nil {
			a.Name = *e.Name
		}
		if e.PriceCents != nil {
			a.PriceCents = *e.PriceCents
		}
		if e.Stock != nil && *e.Stock != a.Stock {
			a.Stock, rev.Reload = *e.Stock, true
		}
		if e.PerUserLimit != nil {
			a.PerUserLimit = *e.PerUserLimit
		}
		if e.StartAt != nil {
			a.StartAt = e.StartAt.UTC().Truncate(time.Millisecond)
		}
		if e.EndAt != nil {
			a.EndAt = e.EndAt.UTC().Truncate(time.Millisecond)
		}
		if e.PayWindow != nil {
			a.PayWindow = *e.PayWindow
		}
		if e.RequireChallenge != nil {
			a.RequireChallenge = *e.RequireChallenge
		}
		for _, r := range []struct{ in, out *int64 }{{e.PerUserRate, &a.Rates.PerUser}, {e.PerIPRate, &a.Rates.PerIP},
			{e.GlobalRate, &a.Rates.Global}} {
			if r.in != nil {
				*r.out = *r.in
			}
		}
		return a, rev, nil
	})
}
