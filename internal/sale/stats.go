package sale

import (
	"context"
	"errors"
)

// Counts are an activity's orders by status, as the database sees them.
type Counts struct {
	Orders    int64 // every order row, failed ones included
	Created   int64
	Paid      int64
	Cancelled int64
	Expired   int64 // the cancelled orders whose payment window closed (ReasonExpired)
	Failed    int64
	// RefundPending and Refunded are cancelled orders whose payment came late: their unit went
	// back on sale as any cancelled order's did, and their money is (to be) given back.
	RefundPending int64
	Refunded      int64
	// DeadLetters are grabs the workers gave up on (not orders).
	DeadLetters int64
}

// Stats is the admin's view of an activity.
type Stats struct {
	Stock     int64
	Remaining int64
	Grabbed   int64
	Orders    int64
	Created   int64
	Paid      int64
	Cancelled int64
	Expired   int64 // of the cancelled, those whose payment window closed
	Failed    int64
	// RefundPending and Refunded are orders paid after they were cancelled (see Counts).
	RefundPending int64
	Refunded      int64
	PendingQueue  int64
	DeadLetters   int64
	// Line is the waiting line of a queue or lottery activity.
	Line *LineStats
}

// LineStats are a line's numbers for the dashboard.
type LineStats struct {
	Joined    int64 // tickets ever taken
	Waiting   int64 // not answered yet: the line's length
	Answered  int64 // admitted to the gate or answered sold out
	Early     int64 // the early crowd, shuffled at the start
	Sealed    bool
	DrainRate float64 // admissions a second, measured by the drainer
	WaitS     float64 // the estimated wait at the tail of the line
}

// Remaining reports the units an activity has left, as the gate sees them, rebuilding the
// activity in the gate if the cache lost it.
// An archived activity's remaining units are the database's: its stock less what its orders
// hold.
func (s *Service) Remaining(ctx context.Context, id string) (int64, error) {
	a, err := s.Activity(ctx, id)
	if err != nil {
		return 0, err
	}
	n, err := s.inventory.Remaining(ctx, a)
	if absent(err) {
		werr := s.warmOne(ctx, id)
		if errors.Is(werr, errArchived) {
			return s.remainingOfArchived(ctx, id)
		}
		if werr != nil {
			return 0, werr
		}
		n, err = s.inventory.Remaining(ctx, a)
	}
	return n, err
}

// remainingOfArchived is an archived activity's remaining units, from the database.
func (s *Service) remainingOfArchived(ctx context.Context, id string) (int64, error) {
	a, err := s.Activity(ctx, id)
	if err != nil {
		return 0, err
	}
	c, err := s.orders.Counts(ctx, id)
	if err != nil {
		return 0, err
	}
	return a.Stock - c.Created - c.Paid, nil
}

// Stats reports an activity's gate and database counters.
func (s *Service) Stats(ctx context.Context, id string) (Stats, error) {
	st, err := s.GateStats(ctx, id)
	if err != nil {
		return Stats{}, err
	}
	// The queue first: a grab leaves it only after its order is committed, so counts read after
	// a depth of zero hold every order (read the other way round, the last batch could slip
	// between the two readings and be in neither).
	a, err := s.Activity(ctx, id)
	if err != nil {
		return Stats{}, err
	}
	depth, err := s.backlog.Depth(ctx, a)
	if err != nil {
		return Stats{}, err
	}
	c, err := s.orders.Counts(ctx, id)
	if err != nil {
		return Stats{}, err
	}
	st.Orders, st.Created, st.Paid, st.Cancelled, st.Failed = c.Orders, c.Created, c.Paid, c.Cancelled, c.Failed
	st.Expired, st.RefundPending, st.Refunded = c.Expired, c.RefundPending, c.Refunded
	st.PendingQueue, st.DeadLetters = depth, c.DeadLetters
	return st, nil
}

// Counts is the part of Stats the database knows: the activity's orders by state and its dead
// letters, what a node whose gate is away still answers.
func (o *Operator) Counts(ctx context.Context, id string) (Counts, error) {
	s := o.core
	if _, err := s.Activity(ctx, id); err != nil {
		return Counts{}, err
	}
	return s.orders.Counts(ctx, id)
}

// GateStats is the part of Stats the gate knows, without the database's counts (which scan the
// activity's orders): what a node under strain still answers.
func (s *Service) GateStats(ctx context.Context, id string) (Stats, error) {
	a, err := s.Activity(ctx, id)
	if err != nil {
		return Stats{}, err
	}
	rem, err := s.Remaining(ctx, id)
	if err != nil {
		return Stats{}, err
	}
	st := Stats{Stock: a.Stock, Remaining: rem, Grabbed: a.Stock - rem}
	if a.Lined() && s.line != nil {
		ls, err := s.line.State(ctx, a.ID)
		if err != nil {
			return Stats{}, err
		}
		st.Line = lineStats(a, ls)
	}
	return st, nil
}

// Gauge is one activity's live numbers for the metrics: what the gate has left and what the
// queue still holds.
type Gauge struct {
	ActivityID string
	Remaining  int64
	Queued     int64
	Line       *LineStats // a queue or lottery activity's line; nil for direct admission
}

// Gauges reads the gate and the queue for every activity this node knows that has not ended.
// An activity the gate or the queue cannot answer for is left out.
func (s *Service) Gauges(ctx context.Context) []Gauge {
	var out []Gauge
	now := s.now()
	s.acts.Range(func(_, v any) bool {
		a := v.(Activity)
		if !now.Before(a.EndAt) {
			return true
		}
		rem, err := s.inventory.Remaining(ctx, a)
		if err != nil {
			return true
		}
		depth, err := s.backlog.Depth(ctx, a)
		if err != nil {
			return true
		}
		g := Gauge{ActivityID: a.ID, Remaining: rem, Queued: depth}
		if a.Lined() && s.line != nil {
			if st, err := s.line.State(ctx, a.ID); err == nil {
				g.Line = lineStats(a, st)
			}
		}
		out = append(out, g)
		return true
	})
	return out
}
