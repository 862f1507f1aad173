package sale

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Grab is one acknowledged win: a unit (or a red-packet share) taken by a user. Its Token names
// the order that the worker will create from it.
type Grab struct {
	Token          string
	ActivityID     string
	UserID         string
	IdempotencyKey string // empty when the client sent none
	Share          int64  // red packet: the index of the share taken; 0 for items
	AmountCents    int64  // what the user pays (item) or receives (red packet)
	At             time.Time
	// Trace is the W3C traceparent of the gate call that took the grab, carried in its stream
	// entry so that the worker's spans join the click's trace; "" when it was not traced.
	Trace string
}

// GrabRequest asks the gate for one unit.
type GrabRequest struct {
	ActivityID     string
	UserID         string
	IdempotencyKey string
	Pass           string // the one-time path token of a solved challenge; "" for none
	Now            time.Time
	// UserRate, when set, is the user's request rate on this activity, checked and spent by the
	// gate in the grab's own call instead of in a bucket at the edge: a grab over it is refused
	// with Throttled and takes nothing. The Redis gate checks it (one call, so one fsync wait, an
	// all-win grab); the edge sets it only for that gate. Zero: the edge has checked.
	UserRate UserRate
}

// UserRate is a token bucket: PerSecond tokens a second, at most Burst at once.
type UserRate struct{ PerSecond, Burst int64 }

// Off reports whether the rate limits nothing.
func (r UserRate) Off() bool { return r.PerSecond <= 0 }

// MaxPassLen bounds a pass (path token) from a client.
const MaxPassLen = 40

// absent reports whether the gate's err says it does not hold the activity: lost (ErrUnloaded),
// or never given it, or archived (ErrNotFound, from a gate that knows only what it holds).
func absent(err error) bool { return errors.Is(err, ErrUnloaded) || errors.Is(err, ErrNotFound) }

// Entry is what a buyer's click on an activity comes to: a unit (Grab) from an activity that
// admits directly, or a place in the line (Ticket, Lined) of a queue or lottery activity, Fresh
// unless the buyer was in the line already and has the ticket they had.
type Entry struct {
	Activity Activity
	Grab     Grab
	Lined    bool
	Ticket   TicketView
	Fresh    bool
}

// Enter is a buyer's click on an activity, whatever its admission: it grabs a unit (as Grab) or
// joins the line (Join), and its errors are theirs.
func (s *Service) Enter(ctx context.Context, req GrabRequest) (Entry, error) {
	a, err := s.Activity(ctx, req.ActivityID)
	if err != nil {
		return Entry{}, err
	}
	if a.Lined() {
		t, fresh, err := s.join(ctx, a, req.UserID, req.IdempotencyKey, req.Pass)
		return Entry{Activity: a, Lined: true, Ticket: t, Fresh: fresh}, err
	}
	g, err := s.take(ctx, a, req)
	return Entry{Activity: a, Grab: g}, err
}

// Grab takes one unit of an activity admitted directly for a user, at the service's clock
// (req.Now is ignored). See Gate.Grab for the errors, and ErrNotLined's twin: a queue or lottery
// activity is refused with ErrInvalid (its grabs Join the line).
func (s *Service) Grab(ctx context.Context, req GrabRequest) (Grab, error) {
	a, err := s.Activity(ctx, req.ActivityID)
	if err != nil {
		return Grab{}, err
	}
	if a.Lined() {
		return Grab{}, fmt.Errorf("%w: a %s activity's grabs join its line", ErrInvalid, a.Admission)
	}
	return s.take(ctx, a, req)
}

// take is the grab of req from a, an activity admitted directly, at the service's clock.
func (s *Service) take(ctx context.Context, a Activity, req GrabRequest) (Grab, error) {
	if len(req.Pass) > MaxPassLen {
		return Grab{}, fmt.Errorf("%w: the path token is not a pass", ErrChallengeRequired)
	}
	req.Now = s.now()
	return s.grab(ctx, a, req)
}

// grab asks the gate, and answers the gate's cache answers itself within the request: an
// activity the gate lost is rebuilt in it, a copy the gate calls stale is read again (and the
// gate given the revisions it lacks), and the grab is asked again, up to gateTries calls in all.
// It raises the local sold-out flag when the gate says so, unless units came back meanwhile.
func (s *Service) grab(ctx context.Context, a Activity, req GrabRequest) (Grab, error) {
	mark := s.markSoldOut(a.ID)
	var g Grab
	var err error
	for try := 1; ; try++ {
		g, err = s.inventory.Grab(ctx, a, req)
		if try == gateTries || ctx.Err() != nil {
			break
		}
		if absent(err) {
			// The cache lost the activity. Nothing can be sold from it while it is absent, so the
			// database and the queue say exactly what it must hold; the rebuild stores that
			// unless another node got there first. An archived activity has ended.
			werr := s.warmOne(ctx, a.ID)
			if errors.Is(werr, errArchived) {
				return Grab{}, ErrEnded
			}
			if werr != nil {
				return Grab{}, werr
			}
			a = s.newest(a)
			continue
		}
		if errors.Is(err, ErrStale) {
			// The activity changed since this node read it, or the gate has not been given the
			// change yet.
			fresh, ferr := s.fresher(ctx, a)
			if ferr != nil && fresh.Revision == a.Revision {
				return Grab{}, fmt.Errorf("%w: grab of %s: %v", ErrBusy, a.ID, ferr)
			}
			a = fresh
			continue
		}
		break
	}
	if errors.Is(err, ErrStale) || errors.Is(err, ErrUnloaded) {
		return Grab{}, fmt.Errorf("%w: grab of %s: %v", ErrBusy, a.ID, err)
	}
	if errors.Is(err, ErrSoldOut) {
		s.raiseSoldOut(mark)
	}
	return g, err
}

// gateTries bounds the gate calls of one grab: a rebuild and a refresh (or two) may come
// between them.
const gateTries = 4

// newest is the node's copy of a, if it is newer than a.
func (s *Service) newest(a Activity) Activity {
	if k, ok := s.Known(a.ID); ok && k.Revision > a.Revision {
		return k
	}
	return a
}
