package sale

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Status is the state of an order.
type Status string

// Order states. PENDING is a grab still in the queue; CREATED an order awaiting payment; FAILED a
// grab the database refused (its guard found no unit or the user's limit reached). A payment that
// comes for a CANCELLED order (its window closed and its unit went back on sale) never brings it
// back: the order becomes REFUND_PENDING, then REFUNDED once the money is given back.
const (
	StatusPending       Status = "PENDING"
	StatusCreated       Status = "CREATED"
	StatusPaid          Status = "PAID"
	StatusCancelled     Status = "CANCELLED"
	StatusFailed        Status = "FAILED"
	StatusRefundPending Status = "REFUND_PENDING"
	StatusRefunded      Status = "REFUNDED"
)

// Holds reports whether an order in status s holds a unit of stock.
func (s Status) Holds() bool { return s == StatusCreated || s == StatusPaid }

// Order is the durable result of a grab.
type Order struct {
	ID          int64
	Token       string
	ActivityID  string
	UserID      string
	IdemKey     string // the grab's idempotency key, kept so a retry finds its first answer
	Share       int64
	AmountCents int64
	Status      Status
	Reason      string // why the order failed or was cancelled
	CreatedAt   time.Time
	ExpiresAt   time.Time // end of the payment window
	ClosedAt    time.Time // when it was paid, cancelled or failed; zero while open
}

// Grab is the grab o was placed from: what a gate holds for it, a leaderboard ranks and a
// release gives back.
func (o Order) Grab() Grab {
	return Grab{Token: o.Token, ActivityID: o.ActivityID, UserID: o.UserID, IdempotencyKey: o.IdemKey,
		Share: o.Share, AmountCents: o.AmountCents, At: o.CreatedAt}
}

// ReasonExpired is the reason of an order cancelled because its payment window closed.
const ReasonExpired = "payment window closed"

// Order returns the order named by ref (its token or numeric id) if userID owns it. A grab still
// in the queue is reported as a PENDING order. Errors: ErrNotFound (also for someone else's order).
func (s *Service) Order(ctx context.Context, userID, ref string) (Order, error) {
	o, err := s.orderByRef(ctx, ref)
	if errors.Is(err, ErrNotFound) {
		var g Grab
		switch g, err = s.backlog.Pending(ctx, ref); {
		case err == nil:
			o = pendingOrder(g)
		case errors.Is(err, ErrNotFound):
			// The worker may have placed it between the two reads.
			o, err = s.orderByRef(ctx, ref)
		}
	}
	if err != nil {
		return Order{}, err
	}
	if o.UserID != userID {
		return Order{}, ErrNotFound
	}
	return o, nil
}

func pendingOrder(g Grab) Order {
	return Order{Token: g.Token, ActivityID: g.ActivityID, UserID: g.UserID, Share: g.Share,
		AmountCents: g.AmountCents, Status: StatusPending, CreatedAt: g.At}
}

// orderByRef reads the order ref names: by its numeric id, or else by its token.
func (s *Service) orderByRef(ctx context.Context, ref string) (Order, error) {
	if ref == "" || len(ref) > MaxIDLen {
		return Order{}, ErrNotFound
	}
	if ref[0] >= '0' && ref[0] <= '9' {
		id, err := strconv.ParseInt(ref, 10, 64)
		if err != nil {
			return Order{}, ErrNotFound
		}
		return s.orders.OrderByID(ctx, id)
	}
	return s.orders.Order(ctx, ref)
}

// placed is userID's order ref once the worker has placed it: a grab still in the queue (a
// PENDING order, returned with the error) cannot be paid or cancelled yet.
func (s *Service) placed(ctx context.Context, userID, ref string) (Order, error) {
	o, err := s.Order(ctx, userID, ref)
	if err != nil {
		return Order{}, err
	}
	if o.Status == StatusPending {
		return o, fmt.Errorf("%w: the order is still being created; retry shortly", ErrInvalidState)
	}
	return o, nil
}

// Pay pays userID's order ref. Paying twice is harmless; paying a cancelled, failed or expired
// order is ErrInvalidState, and so is paying a grab the worker has not turned into an order yet.
func (s *Service) Pay(ctx context.Context, userID, ref string) (Order, error) {
	o, err := s.placed(ctx, userID, ref)
	if err != nil {
		return o, err
	}
	paid, err := s.orders.Pay(ctx, o.Token, s.now())
	if err == nil && o.Status != StatusPaid {
		s.event("paid", 1)
	}
	return paid, err
}

// Cancel cancels userID's unpaid order ref and restocks its unit exactly once. Cancelling twice
// returns the cancelled order; cancelling a paid or failed order is ErrInvalidState.
func (s *Service) Cancel(ctx context.Context, userID, ref string) (Order, error) {
	o, err := s.placed(ctx, userID, ref)
	if err != nil {
		return o, err
	}
	c, err := s.cancel(ctx, o.Token, "cancelled by the buyer")
	if err == nil && o.Status != StatusCancelled {
		s.event("cancelled", 1)
	}
	return c, err
}

// cancel moves an order to CANCELLED; the caller whose conditional update won gives the unit
// back to the gate. The database records the restock as owed in the same transaction, so a gate
// that fails after the commit (Redis away, the breaker open, the client hanging up, a crash)
// loses nothing: ReleaseOwed gives the unit back once the gate answers. The cancel itself has
// succeeded either way.
func (s *Service) cancel(ctx context.Context, token, reason string) (Order, error) {
	o, won, err := s.orders.Cancel(ctx, token, reason, s.now())
	if err != nil || !won {
		return o, err
	}
	// Not on the request's context: a buyer who hangs up has still cancelled.
	if err := s.restock(context.WithoutCancel(ctx), o); err != nil {
		s.event("restock_deferred", 1)
	}
	return o, nil
}

// restock gives the unit of the cancelled order o back to the gate and records it given. A
// failure leaves the restock owed in the database; giving it back again is harmless (the gate
// restocks once per grab token).
func (s *Service) restock(ctx context.Context, o Order) error {
	a, err := s.Activity(ctx, o.ActivityID)
	if err != nil {
		return fmt.Errorf("restock order %s: %w", o.Token, err)
	}
	g := o.Grab()
	err = s.inventory.Release(ctx, a, g)
	if absent(err) {
		// The gate lost the activity: its rebuild may have read the unit as held, so the restock
		// waits for it. An archived activity's gate is gone for good: nothing is owed to it.
		switch werr := s.warmOne(ctx, a.ID); {
		case errors.Is(werr, errArchived):
			err = nil
		case werr != nil:
			err = fmt.Errorf("%w (rebuilding it: %v)", err, werr)
		default:
			err = s.inventory.Release(ctx, s.newest(a), g)
		}
	}
	if err != nil {
		return fmt.Errorf("restock order %s: %w", o.Token, err)
	}
	if s.ranking != nil && a.Kind == KindRedPacket {
		// Until the leaderboard has taken the share off, the restock stays owed, and is given
		// again (ReleaseOwed): the gate restocks once per token, and the leaderboard removes once.
		if err := s.ranking.Remove(ctx, []Grab{g}); err != nil {
			return fmt.Errorf("restock order %s: take its share off the leaderboard: %w", o.Token, err)
		}
	}
	s.lowerSoldOut(o.ActivityID)
	if s.restocks != nil {
		// Best effort: a lost announcement only makes the other nodes wait for their flags
		// to expire.
		s.restocks.Announce(ctx, o.ActivityID)
	}
	if err := s.orders.Released(ctx, o.Token); err != nil {
		return fmt.Errorf("restock order %s: record it given back: %w", o.Token, err)
	}
	return nil
}

// ReleaseOwed gives back to the gate up to limit units of cancelled orders whose restock failed
// when they were cancelled, and returns how many it gave back. Every node's sweeper runs it; two
// giving back the same unit restock it once. A unit the gate cannot take stays owed, and the
// other activities' are given back still (one activity's gate away holds back only its own).
func (s *Service) ReleaseOwed(ctx context.Context, limit int) (int, error) {
	owed, err := s.orders.Unreleased(ctx, limit)
	if err != nil {
		return 0, fmt.Errorf("owed restocks: %w", err)
	}
	n := 0
	var errs []error
	stuck := map[string]bool{}
	for _, o := range owed {
		if stuck[o.ActivityID] {
			continue
		}
		if err := s.restock(ctx, o); err != nil {
			stuck[o.ActivityID] = true
			errs = append(errs, err)
			continue
		}
		n++
	}
	if n > 0 {
		s.event("restock_owed", n)
	}
	if err := errors.Join(errs...); err != nil {
		return n, fmt.Errorf("owed restocks: %w", err)
	}
	return n, nil
}

// SweepExpired cancels up to limit orders whose payment window has closed and restocks each
// exactly once, however many sweepers run at the same time. It returns how many it cancelled.
func (s *Service) SweepExpired(ctx context.Context, limit int) (int, error) {
	expired, err := s.orders.Expired(ctx, s.now(), limit)
	if err != nil {
		return 0, fmt.Errorf("sweep: %w", err)
	}
	n := 0
	for _, o := range expired {
		got, err := s.cancel(ctx, o.Token, ReasonExpired)
		switch {
		case errors.Is(err, ErrInvalidState): // paid meanwhile, or cancelled by a racing sweeper
		case err != nil:
			return n, fmt.Errorf("sweep: %w", err)
		case got.Status == StatusCancelled:
			n++
		}
	}
	return n, nil
}
