package sale

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Reconciliation compares the gate with the database for one activity.
type Reconciliation struct {
	OK                bool
	Stock             int64
	GateRemaining     int64
	ExpectedRemaining int64 // stock less what the database and queue hold
	Held              int64
	Drift             int64 // gate_remaining - expected_remaining
	Repaired          bool
	Outcome           string // ReconcileOK, ReconcileDrift, ReconcileRepaired or ReconcileUnsettled
	Note              string
}

// The outcomes of a reconciliation.
const (
	ReconcileOK        = "ok"        // the gate agrees with the database and the queue
	ReconcileDrift     = "drift"     // a drift seen twice at rest, not repaired (Check)
	ReconcileRepaired  = "repaired"  // a drift seen twice at rest, repaired (Reconcile)
	ReconcileUnsettled = "unsettled" // grabs moved the gate while it was read: nothing concluded
	ReconcileArchived  = "archived"  // the activity's hot state is archived: nothing to compare
)

// Reconcile compares the gate's remaining units with what the database and the queue say, and
// repairs the gate when the two disagree. A grab in flight (taken by the gate, not yet durable)
// looks like drift for a moment, so the comparison is made twice, Deps.ReconcilePause apart, and
// only a drift seen both times with the gate standing still is repaired; the repair itself reads
// the database once more and is made only if nothing moved in the gate meanwhile (Gate.Repair),
// so that a reconcile under live traffic never erases a grab.
func (s *Service) Reconcile(ctx context.Context, id string) (Reconciliation, error) {
	return s.reconcile(ctx, id, true)
}

// Check is Reconcile without the repair: it reports a drift seen twice at rest, and leaves the
// gate as it is (Note says so).
func (s *Service) Check(ctx context.Context, id string) (Reconciliation, error) {
	return s.reconcile(ctx, id, false)
}

func (s *Service) reconcile(ctx context.Context, id string, repair bool) (Reconciliation, error) {
	if _, err := s.Activity(ctx, id); err != nil {
		return Reconciliation{}, err
	}
	// On the activity as the database has it, its revisions given to the gate first: a copy
	// out of date would count the stock it had.
	if err := s.giveRevisions(ctx, id); err != nil {
		return Reconciliation{}, fmt.Errorf("reconcile %s: %w", id, err)
	}
	a, err := s.activities.Activity(ctx, id)
	if err != nil {
		return Reconciliation{}, err
	}
	s.remember(a)
	var rec Reconciliation
	for round := 0; round < 2; round++ {
		if round > 0 {
			select {
			case <-ctx.Done():
				return Reconciliation{}, ctx.Err()
			case <-time.After(s.reconcilePause):
			}
		}
		before, err := s.inventory.Remaining(ctx, a)
		if absent(err) {
			if fresh, ferr := s.activities.Activity(ctx, id); ferr == nil && fresh.Archived() {
				s.remember(fresh)
				return Reconciliation{OK: true, Outcome: ReconcileArchived, Stock: a.Stock,
					Note: "archived: the gate holds nothing of it, the database alone answers"}, nil
			}
		}
		if err != nil {
			return Reconciliation{}, err
		}
		st, _, err := s.gateState(ctx, a)
		if err != nil {
			return Reconciliation{}, err
		}
		after, err := s.inventory.Remaining(ctx, a)
		if err != nil {
			return Reconciliation{}, err
		}
		prev := rec.Drift
		rec = s.compare(a, st, after)
		if before != after {
			rec.Outcome, rec.Note = ReconcileUnsettled, "grabs are in flight; the gate was not compared at rest, try again"
			return rec, nil
		}
		if rec.Drift == 0 {
			rec.OK, rec.Outcome = true, ReconcileOK
			return rec, nil
		}
		if round > 0 && rec.Drift != prev {
			rec.Outcome, rec.Note = ReconcileUnsettled, "the drift moved between two readings; not repaired, try again"
			return rec, nil
		}
	}
	if !repair {
		rec.Outcome, rec.Note = ReconcileDrift, "drift seen twice with the gate at rest; report only, not repaired"
		return rec, nil
	}
	drift := rec.Drift
	var queued []Grab
	var st GateState
	repaired, err := s.inventory.Repair(ctx, a, func(ctx context.Context, remaining int64) (GateState, bool, error) {
		var err error
		if st, queued, err = s.gateState(ctx, a); err != nil {
			return GateState{}, false, err
		}
		rec = s.compare(a, st, remaining)
		return st, rec.Drift == drift, nil
	})
	switch {
	case errors.Is(err, ErrChanged) || err == nil && !repaired:
		rec.Outcome, rec.Note = ReconcileUnsettled, "the gate moved while the repair read the database; not repaired, try again"
		return rec, nil
	case err != nil:
		return rec, fmt.Errorf("repair gate of %s: %w", id, err)
	}
	if err := s.loadRanking(ctx, a, st, queued); err != nil {
		return rec, fmt.Errorf("repair the leaderboard of %s: %w", id, err)
	}
	rec.Repaired, rec.Outcome = true, ReconcileRepaired
	rec.Note = "the gate (and a red packet's leaderboard) was repaired from the database and the queue"
	return rec, nil
}

// compare is a reconciliation of a's gate, holding remaining units, with st.
func (s *Service) compare(a Activity, st GateState, remaining int64) Reconciliation {
	want := st.Remaining(a)
	return Reconciliation{Stock: a.Stock, GateRemaining: remaining, ExpectedRemaining: want,
		Held: int64(len(st.Held)), Drift: remaining - want}
}
