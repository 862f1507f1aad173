package sale

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The gate's recovery: the node keeps the gate in step with the database. An activity the gate
// lost is rebuilt from the database and the queue (Warm, warmOne, rebuild), and the revisions
// it is owed are given to it in order (giveRevisions, ReviseOwed), as is the newer copy a grab
// refused as stale asks for (fresher). The operator's changes that make revisions are in
// revise.go; the reconciliation that compares the gate with the database is in reconcile.go.

// Warm loads every activity that has not ended by since into the gate, from the database and
// the queue, unless the gate holds it already or it is archived: on start, this rebuilds what a
// restart (or kill -9, or a cache that lost its data) lost. While an activity is absent from the
// gate nothing can be sold from it, so the state read here cannot move before Warm stores it.
// The revisions the gate is owed are given last: a state read before a change was made may have
// been stored after it.
func (s *Service) Warm(ctx context.Context, since time.Time) error {
	acts, err := s.activities.Activities(ctx, since)
	if err != nil {
		return fmt.Errorf("warm up: %w", err)
	}
	for _, a := range acts {
		s.remember(a)
		if a.Archived() {
			continue // its hot state was dropped for good: the database answers for it
		}
		if _, err := s.inventory.Remaining(ctx, a); err == nil {
			continue // loaded already: by another node, or the cache outlived this process
		} else if !absent(err) {
			return fmt.Errorf("warm up activity %s: %w", a.ID, err)
		}
		st, queued, err := s.gateState(ctx, a)
		if err != nil {
			return fmt.Errorf("warm up activity %s: %w", a.ID, err)
		}
		if _, err := s.inventory.Warm(ctx, a, st); err != nil {
			return fmt.Errorf("warm up activity %s: %w", a.ID, err)
		}
		if err := s.loadRanking(ctx, a, st, queued); err != nil {
			return fmt.Errorf("warm up the leaderboard of %s: %w", a.ID, err)
		}
	}
	if _, err := s.ReviseOwed(ctx, maxOwedRevisions); err != nil {
		s.event("revision_deferred", 1) // the sweeper gives them, or the first grab to meet one
	}
	return nil
}

// warmOne loads one activity into the gate unless it is there. The grabs and reads that find
// it absent together share one rebuild: a crowd meeting a cache that lost the activity costs one
// read of the database and the queue, not one each.
func (s *Service) warmOne(ctx context.Context, id string) error {
	return s.warming.do(ctx, id, func() error {
		call, cancel := context.WithTimeout(context.WithoutCancel(ctx), rebuildWithin)
		defer cancel()
		return s.rebuild(call, id)
	})
}

// rebuildWithin bounds a shared rebuild of an activity in the gate.
const rebuildWithin = 30 * time.Second

// rebuild reads what the gate must hold for activity id and stores it, unless another node got
// there first, then gives the gate the revisions of id it is owed: a change made after the read
// was not in what was stored, and was not given while the gate lacked the activity.
func (s *Service) rebuild(ctx context.Context, id string) error {
	a, err := s.activities.Activity(ctx, id)
	if err != nil {
		return err
	}
	s.remember(a)
	if a.Archived() {
		return fmt.Errorf("activity %s: %w", id, errArchived)
	}
	st, queued, err := s.gateState(ctx, a)
	if err != nil {
		return fmt.Errorf("rebuild activity %s: %w", id, err)
	}
	loaded, err := s.inventory.Warm(ctx, a, st)
	if err != nil {
		return fmt.Errorf("rebuild activity %s: %w", id, err)
	}
	if loaded {
		if err := s.loadRanking(ctx, a, st, queued); err != nil {
			return fmt.Errorf("rebuild the leaderboard of %s: %w", id, err)
		}
	}
	if err := s.giveRevisions(ctx, id); err != nil {
		s.event("revision_deferred", 1) // a grab that meets it stale gives it, or the sweeper
	}
	return nil
}

// gateState is what the gate of a must hold: the database's orders plus the queue's grabs,
// which it returns too.
func (s *Service) gateState(ctx context.Context, a Activity) (GateState, []Grab, error) {
	unacked, err := s.backlog.Unacked(ctx, a)
	if err != nil {
		return GateState{}, nil, err
	}
	st, err := s.orders.GateState(ctx, a, unacked)
	return st, unacked, err
}

// giveRevisions gives the gate the revisions of activity id it is owed, in order, and tells
// every node that its units may be back on sale.
func (s *Service) giveRevisions(ctx context.Context, id string) error {
	owed, err := s.activities.Unrevised(ctx, id, maxOwedRevisions)
	if err != nil {
		return err
	}
	_, err = s.give(ctx, owed)
	return err
}

// maxOwedRevisions bounds the revisions read at once: a handful, owed only while the gate was
// away.
const maxOwedRevisions = 100

// give gives the gate the revisions of owed, each activity's in the order of their numbers, and
// reports how many it gave. A revision the gate cannot take (it is away, or does not hold the
// activity: a rebuild gives it then) stays owed, and so do the later ones of its activity; the
// other activities' are given still, and the errors are returned together.
func (s *Service) give(ctx context.Context, owed []Revision) (int, error) {
	owed = slices.Clone(owed)
	slices.SortFunc(owed, func(a, b Revision) int {
		return cmp.Or(strings.Compare(a.ActivityID, b.ActivityID), cmp.Compare(a.Revision, b.Revision))
	})
	n := 0
	var errs []error
	stuck := ""
	for _, r := range owed {
		if r.ActivityID == stuck {
			continue
		}
		if err := s.giveRevision(ctx, r); err != nil {
			stuck = r.ActivityID
			errs = append(errs, fmt.Errorf("revision %d of %s: %w", r.Revision, r.ActivityID, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// giveRevision gives the gate revision r and records it given; it stays owed unless the gate
// took it (or the activity is archived: its gate is gone). Every node's sold-out flag goes:
// units may be back, and a flag would hide an end.
func (s *Service) giveRevision(ctx context.Context, r Revision) error {
	a, err := s.activities.Activity(ctx, r.ActivityID)
	if err != nil {
		return err
	}
	if !a.Archived() {
		err := s.giveOne(ctx, a, r)
		if errors.Is(err, ErrChanged) && !r.Reload {
			// The gate holds an older revision than the one before r (a replica promoted that
			// had not seen it): it is made again from the database, at a's revision.
			err = s.giveOne(ctx, a, Revision{ActivityID: r.ActivityID, Revision: r.Revision, Reload: true})
		}
		if err != nil {
			return err
		}
		if a.Lined() && s.line != nil {
			// The line checks the end itself: a node whose copy predates it issues no ticket.
			if err := s.line.Revise(ctx, a); err != nil {
				return fmt.Errorf("the line: %w", err)
			}
		}
	}
	if err := s.activities.Revised(ctx, r.ActivityID, r.Revision); err != nil {
		return fmt.Errorf("record it given: %w", err)
	}
	s.lowerSoldOut(r.ActivityID)
	if s.restocks != nil {
		s.restocks.Announce(ctx, r.ActivityID) // best effort, as for a restock
	}
	return nil
}

// giveOne gives the gate revision r of a (a as the database has it now, at r's revision or a
// later one). A reload is a repair on a: the gate made to hold what the database and the queue
// say (before the start, nothing), at a's revision, provided nothing moved in it meanwhile.
func (s *Service) giveOne(ctx context.Context, a Activity, r Revision) error {
	if !r.Reload {
		a.Revision = r.Revision
		return s.inventory.Revise(ctx, a, r.Add)
	}
	_, err := s.inventory.Repair(ctx, a, func(ctx context.Context, _ int64) (GateState, bool, error) {
		st, _, err := s.gateState(ctx, a)
		return st, err == nil, err
	})
	return err
}

// ReviseOwed gives the gate up to limit revisions it is owed (their activity changed while it
// was away) and returns how many it gave. Every node's sweeper runs it; two giving the same
// revision give it once. An activity the gate lost is rebuilt first: the rebuild gives its
// revisions.
func (s *Service) ReviseOwed(ctx context.Context, limit int) (int, error) {
	owed, err := s.activities.Unrevised(ctx, "", limit)
	if err != nil {
		return 0, fmt.Errorf("owed revisions: %w", err)
	}
	n, err := s.give(ctx, owed)
	if n > 0 {
		s.event("revision_owed", n)
	}
	if err != nil {
		return n, fmt.Errorf("owed revisions: %w", err)
	}
	return n, nil
}

// fresher answers a grab that the gate refused as stale (ErrStale): it returns the node's copy
// of the activity if it is newer than a, or else reads the activity again and gives the gate the
// revisions it lacks, once per activity however many grabs ask together, and returns the copy
// then. The refresh is not bound to ctx: a caller who hangs up must not fail the others'.
func (s *Service) fresher(ctx context.Context, a Activity) (Activity, error) {
	if k := s.newest(a); k.Revision > a.Revision {
		return k, nil
	}
	err := s.refreshing.do(ctx, a.ID, func() error {
		if s.newest(a).Revision > a.Revision {
			return nil // a refresh that ended after this grab looked brought the newer copy
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refreshWithin)
		defer cancel()
		fresh, err := s.activities.Activity(ctx, a.ID)
		if err != nil {
			return err
		}
		s.remember(fresh)
		return s.giveRevisions(ctx, a.ID)
	})
	if k := s.newest(a); k.Revision > a.Revision {
		return k, nil // newer, whether or not the gate could be given what it lacks
	}
	return a, err
}

// refreshWithin bounds a shared refresh of an activity: a read of the database and the gate's
// revisions.
const refreshWithin = 5 * time.Second

// GateState is what the database knows about an activity's stock, from which a gate is built or
// rebuilt: after a restart, a lost cache, or a reconcile.
type GateState struct {
	Held   []Grab  // grabs that hold a unit now: still queued, or with a CREATED or PAID order
	Keyed  []Grab  // every grab made with an idempotency key, so a retry gets the first answer
	Shares []Share // red packet: the shares nobody holds
}

// Remaining is how many units a gate holding st for a has left to sell: a red packet's shares
// nobody holds, an item's stock less the units held. It is negative when st holds more than a's
// stock, which no gate may load.
func (st GateState) Remaining(a Activity) int64 {
	if a.Kind == KindRedPacket {
		return int64(len(st.Shares))
	}
	return a.Stock - int64(len(st.Held))
}
