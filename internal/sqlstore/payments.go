package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"seckill/internal/sale"
)

const paymentColumns = `payment_id, order_token, activity_id, user_id, amount_cents, state, created_at, updated_at,
	received_cents, refund_reason, provider, provider_ref`

func scanPayment(row interface{ Scan(...any) error }) (sale.Payment, error) {
	var p sale.Payment
	var state, reason string
	var created, updated int64
	err := row.Scan(&p.ID, &p.OrderToken, &p.ActivityID, &p.UserID, &p.AmountCents, &state, &created, &updated,
		&p.ReceivedCents, &reason, &p.Provider, &p.ProviderRef)
	p.State, p.CreatedAt, p.UpdatedAt = sale.PaymentState(state), fromMS(created), fromMS(updated)
	p.RefundReason = sale.RefundReason(reason)
	return p, err
}

func paymentByID(ctx context.Context, q querier, id, lock string) (sale.Payment, error) {
	p, err := scanPayment(q.QueryRowContext(ctx, `SELECT `+paymentColumns+` FROM payments WHERE payment_id = ?`+lock, id))
	if errors.Is(err, sql.ErrNoRows) {
		return sale.Payment{}, fmt.Errorf("payment %s: %w", id, sale.ErrNotFound)
	}
	return p, err
}

// StartPayment implements sale.PaymentStore. The order's open payment is the one whose
// open_token is the order's token: its unique key makes two racing clicks start one payment.
func (s *Store) StartPayment(ctx context.Context, token, id, provider string, now time.Time) (sale.Payment, error) {
	var p sale.Payment
	err := s.inTx(ctx, func(t tx) error {
		o, err := orderByToken(ctx, t, token)
		switch {
		case err != nil:
			return err
		case o.Status != sale.StatusCreated:
			return fmt.Errorf("%w: order %s is %s", sale.ErrInvalidState, token, o.Status)
		case !now.Before(o.ExpiresAt):
			return fmt.Errorf("%w: the payment window of order %s has closed", sale.ErrInvalidState, token)
		}
		// Two tries: a payment open with another provider is closed (failed) before the second.
		for range 2 {
			res, err := t.ExecContext(ctx, `INSERT INTO payments (payment_id, order_token, open_token, activity_id, user_id,
				amount_cents, state, created_at, updated_at, provider) VALUES (?, ?, ?, ?, ?, ?, 'started', ?, ?, ?)`+t.d.keepFirst("payment_id"),
				id, o.Token, o.Token, o.ActivityID, o.UserID, o.AmountCents, ms(now), ms(now), provider)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n == 1 {
				p = sale.Payment{ID: id, OrderToken: o.Token, ActivityID: o.ActivityID, UserID: o.UserID, AmountCents: o.AmountCents,
					State: sale.PaymentStarted, CreatedAt: fromMS(ms(now)), UpdatedAt: fromMS(ms(now)), Provider: provider}
				return err
			}
			// The order has an open payment already: that one, if it is with this provider.
			p, err = scanPayment(t.QueryRowContext(ctx, `SELECT `+paymentColumns+` FROM payments WHERE open_token = ?`+t.d.forUpdate(), token))
			switch {
			case errors.Is(err, sql.ErrNoRows): // settled meanwhile: the buyer may start again
				return fmt.Errorf("%w: a payment of order %s was settled meanwhile", sale.ErrInvalidState, token)
			case err != nil || p.Provider == provider:
				return err
			}
			// The buyer chose another provider: the first payment is closed. Its provider may
			// still take the money: its notice then pays the order, or is owed back (Settle).
			if _, err := t.ExecContext(ctx, `UPDATE payments SET state = 'failed', open_token = NULL, updated_at = ?
				WHERE payment_id = ? AND state = 'started'`, ms(now), p.ID); err != nil {
				return err
			}
		}
		return fmt.Errorf("%w: order %s is being paid by another click", sale.ErrInvalidState, token)
	})
	return p, err
}

// Settle implements sale.PaymentStore. The payment's row is locked first, so that duplicate
// callbacks of one payment run one after the other, each reading what the one before it left;
// the order changes by conditional updates, which the sweeper's cancel races on the order's row
// (whichever commits first wins, and the other sees it).
func (s *Store) Settle(ctx context.Context, n sale.PaymentNotice, now time.Time) (sale.Settlement, error) {
	var st sale.Settlement
	err := s.inTx(ctx, func(t tx) error {
		st = sale.Settlement{}
		p, err := paymentByID(ctx, t, n.PaymentID, t.d.forUpdate())
		if errors.Is(err, sale.ErrNotFound) && n.Outcome == sale.OutcomeSucceeded {
			// Money taken under an id we never issued: recorded, owed back. A copy of the
			// notice that recorded it first (its insert met this one's) is read back below,
			// locked, and this one is a repeat of it.
			var recorded bool
			if recorded, err = s.stray(ctx, t, &st, n, now); err != nil || recorded {
				return err
			}
			p, err = paymentByID(ctx, t, n.PaymentID, t.d.forUpdate())
		}
		if err != nil {
			return err
		}
		st.Payment = p
		switch n.Outcome {
		case sale.OutcomeSucceeded:
			if (p.State == sale.PaymentStarted || p.State == sale.PaymentFailed) && n.ProviderRef != "" {
				if _, err := t.ExecContext(ctx, `UPDATE payments SET provider_ref = ? WHERE payment_id = ?`, n.ProviderRef, p.ID); err != nil {
					return err
				}
				st.Payment.ProviderRef = n.ProviderRef
			}
			// A failure is not final: a provider may take the money on a retry of the same
			// payment (Stripe's PaymentIntent in one Checkout Session), or report an attempt's
			// failure after another's success. A success after a failure is money taken like
			// any other: kept if its order is still CREATED (its unit held), owed back if not.
			switch {
			case p.State != sale.PaymentStarted && p.State != sale.PaymentFailed:
				// The money came before: a repeat, whatever order it names, unless it says
				// another amount was taken, which no record of ours can square with the first.
				if n.AmountCents != p.ReceivedCents {
					return fmt.Errorf("%w: payment %s took %d cents already, not %d", sale.ErrInvalidState, p.ID, p.ReceivedCents,
						n.AmountCents)
				}
			case p.OrderToken != n.OrderToken:
				return s.oweBack(ctx, t, &st, n.AmountCents, sale.RefundOrderMismatch, now)
			case p.AmountCents != n.AmountCents:
				return s.oweBack(ctx, t, &st, n.AmountCents, sale.RefundAmountMismatch, now)
			default:
				return s.succeeded(ctx, t, &st, now)
			}
		case sale.OutcomeFailed:
			switch {
			case p.OrderToken != n.OrderToken:
				return fmt.Errorf("%w: payment %s is not of order %s", sale.ErrInvalid, p.ID, n.OrderToken)
			case p.AmountCents != n.AmountCents:
				return fmt.Errorf("%w: payment %s is of %d cents, not %d", sale.ErrAmountMismatch, p.ID, p.AmountCents, n.AmountCents)
			}
			switch p.State {
			case sale.PaymentStarted:
				return s.failed(ctx, t, &st, now)
			case sale.PaymentFailed:
			default:
				return fmt.Errorf("%w: payment %s is %s: the money came", sale.ErrInvalidState, p.ID, p.State)
			}
		case sale.OutcomeRefunded:
			switch {
			case p.State != sale.PaymentRefundPending && p.State != sale.PaymentRefunded:
				return fmt.Errorf("%w: payment %s is %s: no refund was asked for", sale.ErrInvalidState, p.ID, p.State)
			case p.ReceivedCents != n.AmountCents:
				return fmt.Errorf("%w: payment %s received %d cents, not %d", sale.ErrAmountMismatch, p.ID, p.ReceivedCents, n.AmountCents)
			case p.State == sale.PaymentRefundPending:
				return s.refunded(ctx, t, &st, now)
			}
		default:
			return fmt.Errorf("%w: payment outcome %q", sale.ErrInvalid, n.Outcome)
		}
		st.Order, _, err = orderOf(ctx, t, p.OrderToken, "")
		return err
	})
	return st, err
}

// orderOf reads the order of token, locked with lock, and whether there is one: a payment
// recorded from a notice may name an order we do not have.
func orderOf(ctx context.Context, q querier, token, lock string) (sale.Order, bool, error) {
	o, err := scanOrder(q.QueryRowContext(ctx, `SELECT `+orderColumns+` FROM orders WHERE token = ?`+lock, token))
	if errors.Is(err, sql.ErrNoRows) {
		return sale.Order{}, false, nil
	}
	return o, err == nil, err
}

// setPayment moves st's payment to state at now, closing it (an order may start another).
func setPayment(ctx context.Context, t tx, st *sale.Settlement, state sale.PaymentState, now time.Time) error {
	if _, err := t.ExecContext(ctx, `UPDATE payments SET state = ?, open_token = NULL, updated_at = ? WHERE payment_id = ?`,
		string(state), ms(now), st.Payment.ID); err != nil {
		return err
	}
	st.Payment.State, st.Payment.UpdatedAt, st.Changed = state, fromMS(ms(now)), true
	return nil
}

// received records that the provider took cents for st's payment, kept (reason "") or owed
// back for reason.
func received(ctx context.Context, t tx, st *sale.Settlement, cents int64, reason sale.RefundReason, now time.Time) error {
	state := sale.PaymentSucceeded
	if reason != "" {
		state = sale.PaymentRefundPending
	}
	if _, err := t.ExecContext(ctx, `UPDATE payments SET received_cents = ?, refund_reason = ? WHERE payment_id = ?`,
		cents, string(reason), st.Payment.ID); err != nil {
		return err
	}
	st.Payment.ReceivedCents, st.Payment.RefundReason = cents, reason
	return setPayment(ctx, t, st, state, now)
}

// succeeded settles the money that came for st's payment: it pays a CREATED order; for an order
// that cannot take it (cancelled, or paid by another payment) it is to be given back.
func (s *Store) succeeded(ctx context.Context, t tx, st *sale.Settlement, now time.Time) error {
	token := st.Payment.OrderToken
	res, err := t.ExecContext(ctx, `UPDATE orders SET status = 'PAID', closed_at = ? WHERE token = ? AND status = 'CREATED'`,
		ms(now), token)
	if err != nil {
		return err
	}
	paid, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if paid == 1 {
		if st.Order, err = orderByToken(ctx, t, token); err != nil {
			return err
		}
		if err := received(ctx, t, st, st.Payment.AmountCents, "", now); err != nil {
			return err
		}
		return s.emit(ctx, t, []sale.Event{paymentEvent(sale.EventPaid, st.Order, st.Payment, now)})
	}
	// Cancelled (the sweeper's cancel won the order's row, and its unit is back on sale), or
	// paid by another payment: the money goes back.
	return s.oweBack(ctx, t, st, st.Payment.AmountCents, "", now)
}

// oweBack records that the provider took cents for st's payment, which no order keeps: it is to
// be given back, for reason ("": the order's state says which, closed or paid twice). An order of
// the payment that was cancelled becomes REFUND_PENDING (of an order's payments owed back, the
// first makes it so; the others find it so), and its order.refund_requested event asks for the
// money back.
func (s *Store) oweBack(ctx context.Context, t tx, st *sale.Settlement, cents int64, reason sale.RefundReason, now time.Time) error {
	token := st.Payment.OrderToken
	if _, err := t.ExecContext(ctx, `UPDATE orders SET status = 'REFUND_PENDING' WHERE token = ? AND status = 'CANCELLED'`,
		token); err != nil {
		return err
	}
	o, known, err := orderOf(ctx, t, token, "")
	if err != nil {
		return err
	}
	if reason == "" {
		reason = sale.RefundOrderClosed
		if o.Status == sale.StatusPaid {
			reason = sale.RefundPaidTwice
		}
	}
	st.Order = o
	if err := received(ctx, t, st, cents, reason, now); err != nil {
		return err
	}
	if !known {
		return nil // no order to tell of it: the payment is listed among those owed back
	}
	return s.emit(ctx, t, []sale.Event{paymentEvent(sale.EventRefundRequested, o, st.Payment, now)})
}

// stray records n, a notice of money taken under a payment id we never issued, as a payment of
// the order it names (which may be none of ours) that is owed back. It reports false when the
// payment was recorded meanwhile (a copy of n, or a payment of ours after all), leaving st as it
// was.
func (s *Store) stray(ctx context.Context, t tx, st *sale.Settlement, n sale.PaymentNotice, now time.Time) (bool, error) {
	o, _, err := orderOf(ctx, t, n.OrderToken, "")
	if err != nil {
		return false, err
	}
	res, err := t.ExecContext(ctx, `INSERT INTO payments (payment_id, order_token, open_token, activity_id, user_id,
		amount_cents, state, created_at, updated_at, received_cents, refund_reason, provider, provider_ref)
		VALUES (?, ?, NULL, ?, ?, 0, 'started', ?, ?, 0, '', ?, ?)`+t.d.keepFirst("payment_id"),
		n.PaymentID, n.OrderToken, o.ActivityID, o.UserID, ms(now), ms(now), n.Provider, n.ProviderRef)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return false, err
	}
	st.Payment = sale.Payment{ID: n.PaymentID, OrderToken: n.OrderToken, ActivityID: o.ActivityID, UserID: o.UserID,
		State: sale.PaymentStarted, CreatedAt: fromMS(ms(now)), UpdatedAt: fromMS(ms(now)), Provider: n.Provider,
		ProviderRef: n.ProviderRef}
	return true, s.oweBack(ctx, t, st, n.AmountCents, sale.RefundUnknownPayment, now)
}

// failed records that the provider took nothing for st's payment.
func (s *Store) failed(ctx context.Context, t tx, st *sale.Settlement, now time.Time) error {
	if err := setPayment(ctx, t, st, sale.PaymentFailed, now); err != nil {
		return err
	}
	var err error
	st.Order, err = orderByToken(ctx, t, st.Payment.OrderToken)
	return err
}

// refunded records that st's payment was given back; its order is REFUNDED once none of its
// payments waits for a refund. The order's row is locked before the count, so that two refunds
// of one order's payments cannot each see the other still pending.
func (s *Store) refunded(ctx context.Context, t tx, st *sale.Settlement, now time.Time) error {
	token := st.Payment.OrderToken
	o, known, err := orderOf(ctx, t, token, t.d.forUpdate())
	if err != nil {
		return err
	}
	if err := setPayment(ctx, t, st, sale.PaymentRefunded, now); err != nil {
		return err
	}
	if !known {
		return nil // money taken for no order of ours: nothing else to change, no order to tell
	}
	var waiting int64
	if err := t.QueryRowContext(ctx, `SELECT COUNT(*) FROM payments WHERE order_token = ? AND state = 'refund_pending'`,
		token).Scan(&waiting); err != nil {
		return err
	}
	if waiting == 0 && o.Status == sale.StatusRefundPending {
		if _, err := t.ExecContext(ctx, `UPDATE orders SET status = 'REFUNDED' WHERE token = ? AND status = 'REFUND_PENDING'`,
			token); err != nil {
			return err
		}
	}
	if st.Order, err = orderByToken(ctx, t, token); err != nil {
		return err
	}
	return s.emit(ctx, t, []sale.Event{paymentEvent(sale.EventRefunded, st.Order, st.Payment, now)})
}

// Payment implements sale.PaymentStore.
func (s *Store) Payment(ctx context.Context, id string) (sale.Payment, error) {
	return paymentByID(ctx, s.r, id, "")
}

// Payments implements sale.PaymentStore.
func (s *Store) Payments(ctx context.Context, f sale.PaymentFilter) ([]sale.Payment, error) {
	var where []string
	var args []any
	if f.State != "" {
		where, args = append(where, "state = ?"), append(args, string(f.State))
	}
	if f.OrderToken != "" {
		where, args = append(where, "order_token = ?"), append(args, f.OrderToken)
	}
	q := `SELECT ` + paymentColumns + ` FROM payments`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	rows, err := s.r.QueryContext(ctx, q+` ORDER BY created_at DESC, payment_id DESC LIMIT ?`, append(args, f.Limit)...)
	return collect(rows, err, scanPayment)
}
