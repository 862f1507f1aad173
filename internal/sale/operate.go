package sale

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// What an operator reads of a sale, and the dead letters they replay: the admin API's use cases
// beside the changes (revise.go).

// DeadLetter is a grab the workers gave up on: acknowledged to its buyer, never an order. Its
// unit stays held in the gate until a reconcile gives it back.
type DeadLetter struct {
	Grab     Grab
	Attempts int
	Reason   string
	At       time.Time
}

// OrderFilter selects orders to list: of ActivityID and of UserID when set (one of them is),
// with an id below Before when positive (paging back), at most Limit, the newest first.
type OrderFilter struct {
	ActivityID string
	UserID     string
	Before     int64
	Limit      int
}

// Orders lists orders for an operator: a user's (the support desk's first question), or an
// activity's. Errors: ErrInvalid, ErrBusy.
func (o *Operator) Orders(ctx context.Context, f OrderFilter) ([]Order, error) {
	s := o.core
	switch {
	case f.ActivityID == "" && f.UserID == "":
		return nil, fmt.Errorf("%w: name the user or the activity", ErrInvalid)
	case f.ActivityID != "" && !ValidID(f.ActivityID):
		return nil, badID("activity")
	case f.UserID != "" && !ValidUserID(f.UserID):
		return nil, BadUserID("user")
	}
	if err := checkPage(f.Limit, f.Before, "order id"); err != nil {
		return nil, err
	}
	return s.orders.Orders(ctx, f)
}

// ExportOrders calls fn with every order of activity id, the oldest first: the export an
// operator hands to finance. Errors: ErrNotFound, ErrBusy, and fn's.
func (o *Operator) ExportOrders(ctx context.Context, id string, fn func(Order) error) error {
	s := o.core
	if _, err := s.Activity(ctx, id); err != nil {
		return err
	}
	return s.orders.EachOrder(ctx, id, fn)
}

// AllActivities lists up to limit activities that end after since (the zero time: all, ended
// ones included), the latest start first: the operator's list. Errors: ErrInvalid, ErrBusy.
func (o *Operator) AllActivities(ctx context.Context, since time.Time, limit int) ([]Activity, error) {
	s := o.core
	if err := checkPage(limit, 0, ""); err != nil {
		return nil, err
	}
	acts, err := s.activities.Activities(ctx, since)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(acts, func(a, b Activity) int {
		if c := b.StartAt.Compare(a.StartAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return acts[:min(limit, len(acts))], nil
}

// DeadLetters lists up to limit dead letters of activity id ("": every activity's), the newest
// first. Errors: ErrInvalid, ErrBusy.
func (o *Operator) DeadLetters(ctx context.Context, id string, limit int) ([]DeadLetter, error) {
	s := o.core
	if id != "" && !ValidID(id) {
		return nil, badID("activity")
	}
	if err := checkPage(limit, 0, ""); err != nil {
		return nil, err
	}
	return s.orders.DeadLetters(ctx, id, limit)
}

// ReplayDeadLetter places the dead-lettered grab of token as the worker would have (a fault
// fixed since: the database was refusing it), and takes it off the dead letters, in one
// transaction: its buyer gets the order they were told they had, or a FAILED one if the
// database's guard has no unit for it any more. The order's payment window opens now, at the
// replay: opened at the grab, a grab replayed later than its window would be cancelled by the
// next sweep before its buyer could pay. Errors: ErrNotFound, ErrInvalid (a dead letter
// kept without its grab, from before grabs were kept, or one the database refuses still:
// ErrUnplaceable too), ErrBusy.
func (o *Operator) ReplayDeadLetter(ctx context.Context, token string) (Placement, error) {
	s := o.core
	if token == "" || len(token) > MaxIDLen {
		return Placement{}, fmt.Errorf("dead letter %q: %w", token, ErrNotFound)
	}
	p, err := s.orders.ReplayDeadLetter(ctx, token, s.now())
	if errors.Is(err, ErrUnplaceable) {
		return p, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err != nil {
		return p, err
	}
	if p.New && p.Order.Status != StatusFailed {
		s.event("created", 1)
	}
	// Best effort: a red packet's leaderboard that misses it is fixed by the next load.
	s.rank(ctx, []Placement{p}, false)
	return p, nil
}

// Operator is what an operator does to the sale besides creating it: add stock, edit or end an
// activity (a revision the gate is given), read every activity, the orders and the dead
// letters, replay a dead letter. A feature of its own, on the core service.
type Operator struct{ core *Service }

// NewOperator returns the operator's controls of core's sales.
func NewOperator(core *Service) *Operator { return &Operator{core: core} }
