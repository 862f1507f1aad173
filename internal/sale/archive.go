package sale

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Archive drops a's hot state (its gate, line and leaderboard) once nothing can change it any
// more: its sale and every pay window are over (no CREATED order is left: the sweeper closed
// them), its queue is drained and no restock of it is owed. The database is told first, so that
// no node rebuilds what is being dropped (a read of an archived activity answers from the
// database), then each store drops its part; a second call drops again, harmlessly. It reports
// whether a was archived now or before; false, nil means not yet.
func (s *Service) Archive(ctx context.Context, a Activity) (bool, error) {
	if s.now().Before(a.EndAt.Add(a.PayWindow)) {
		return false, nil
	}
	if n, err := s.backlog.Depth(ctx, a); err != nil || n > 0 {
		return false, err
	}
	c, err := s.orders.Counts(ctx, a.ID)
	if err != nil || c.Created > 0 {
		return false, err
	}
	owed, err := s.orders.Unreleased(ctx, maxOwedChecked)
	if err != nil || slices.ContainsFunc(owed, func(o Order) bool { return o.ActivityID == a.ID }) {
		return false, err
	}
	if !a.Archived() {
		for _, keep := range s.archiving {
			if err := keep(ctx, a); err != nil {
				return false, fmt.Errorf("archive %s: %w", a.ID, err)
			}
		}
		if err := s.activities.Archive(ctx, a.ID, s.now()); err != nil {
			return false, fmt.Errorf("archive %s: %w", a.ID, err)
		}
		if a, err = s.activities.Activity(ctx, a.ID); err != nil {
			return false, fmt.Errorf("archive %s: %w", a.ID, err)
		}
	}
	s.remember(a)
	if err := s.inventory.Drop(ctx, a); err != nil {
		return false, fmt.Errorf("archive %s: %w", a.ID, err)
	}
	if a.Lined() && s.line != nil {
		if err := s.line.Drop(ctx, a.ID); err != nil {
			return false, fmt.Errorf("archive %s: %w", a.ID, err)
		}
	}
	if a.Kind == KindRedPacket && s.ranking != nil {
		if err := s.ranking.Drop(ctx, a.ID); err != nil {
			return false, fmt.Errorf("archive %s: %w", a.ID, err)
		}
	}
	s.soldOut.Delete(a.ID)
	s.entries.Delete(a.ID)
	return true, nil
}

// beforeArchive makes Archive call keep with an activity before it marks it archived: what a
// feature keeps of a finished sale (Forecasts.Keep). A keep that fails holds the archive back,
// to be tried again; it may be called again for an activity, and keeps the first. Called while
// the node is built, before the service is used.
func (s *Service) beforeArchive(keep func(context.Context, Activity) error) {
	s.archiving = append(s.archiving, keep)
}

// maxOwedChecked is how many owed restocks Archive looks through for one of its activity.
const maxOwedChecked = 10_000

// ArchiveDue archives the activities whose pay windows closed more than keep ago (see Archive),
// and drops again those archived in the last hour (a node that died mid-drop, a rebuild that
// raced it). It reports how many it archived.
func (s *Service) ArchiveDue(ctx context.Context, keep time.Duration) (int, error) {
	now := s.now()
	// Activities that ended within a week before the due ones: those ended earlier were
	// archived by earlier rounds (a cluster down for longer leaves them to an operator).
	acts, err := s.activities.Activities(ctx, now.Add(-keep-MaxPayWindow-archiveBacklog))
	if err != nil {
		return 0, fmt.Errorf("archive: %w", err)
	}
	n := 0
	for _, a := range acts {
		due := !now.Before(a.EndAt.Add(a.PayWindow + keep))
		if !due || a.Archived() && now.Sub(a.ArchivedAt) > time.Hour {
			continue
		}
		fresh := !a.Archived()
		done, err := s.Archive(ctx, a)
		if err != nil {
			return n, err
		}
		if done && fresh {
			n++
		}
	}
	return n, nil
}

// archiveBacklog is how far past its due time an activity is still looked at by ArchiveDue.
const archiveBacklog = 7 * 24 * time.Hour
