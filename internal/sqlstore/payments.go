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

const paymentColumns = `payment_id, order_token, activity_id, user_id, amount_cents, state, created_at, updated_at`

func scanPayment(row interface{ Scan(...any) error }) (sale.Payment, error) {
	var p sale.Payment
	var state string
	var created, updated int64
	err := row.Scan(&p.ID, &p.OrderToken, &p.ActivityID, &p.UserID, &p.AmountCents, &state, &created, &updated)
	p.State, p.CreatedAt, p.UpdatedAt = sale.PaymentState(state), fromMS(created), fromMS(updated)
	return p, err
}

func paymentByID(ctx context.Context, q querier, id, lock string) (sale.Payment, error) {
	p, err := scanPayment(q.QueryRowContext(ctx, `SELECT `+paymentColumns+` FROM payments WHERE payment_id = ?`+lock, id))
	if errors.Is(err, sql.ErrNoRows) {
		return sale.Payment{}, fmt.Errorf("payment %s: %w", id, sale.ErrNotFound)
	}
	return p, err
}

// forUpdate ends a SELECT that locks the rows it reads until the transaction ends. SQLite needs
// none: its one writer runs one transaction at a time.
func (d *dialect) forUpdate() string {
	if d == sqliteDialect {
		return ""
	}
	return " FOR UPDATE"
}

// StartPayment implements sale.PaymentStore. The order's open payment is the one whose
// open_token is the order's token: its unique key makes two racing clicks start one payment.
func (s *Store) StartPayment(ctx context.Context, token, id string, now time.Time) (sale.Payment, error) {
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
		res, err := t.ExecContext(ctx, `INSERT INTO payments (payment_id, order_token, open_token, activity_id, user_id,
			amount_cents, state, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, 'started', ?, ?)`+t.d.keepFirst("payment_id"),
			id, o.Token, o.Token, o.ActivityID, o.UserID, o.AmountCents, ms(now), ms(now))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err != nil {
				return err
			}
			// The order has an open payment already: that one.
			p, err = scanPayment(t.QueryRowContext(ctx, `SELECT `+paymentColumns+` FROM payments WHERE open_token = ?`, token))
			if errors.Is(err, sql.ErrNoRows) { // settled meanwhile: the buyer may start again
				return fmt.Errorf("%w: a payment of order %s was settled meanwhile", sale.ErrInvalidState, token)
			}
			return err
		}
		p = sale.Payment{ID: id, OrderToken: o.Token, ActivityID: o.ActivityID, UserID: o.UserID, AmountCents: o.AmountCents,
			State: sale.PaymentStarted, CreatedAt: fromMS(ms(now)), UpdatedAt: fromMS(ms(now))}
		return nil
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
		switch {
		case err != nil:
			return err
		case p.OrderToken != n.OrderToken:
			return fmt.Errorf("%w: payment %s is not of order %s", sale.ErrInvalid, p.ID, n.OrderToken)
		case p.AmountCents != n.AmountCents:
			return fmt.Errorf("%w: payment %s is of %d cents, not %d", sale.ErrAmountMismatch, p.ID, p.AmountCents, n.AmountCents)
		}
		st.Payment = p
		switch n.Outcome {
		case sale.OutcomeSucceeded:
			if p.State != sale.PaymentStarted && p.State != sale.PaymentFailed {
				break // the money came before: nothing new
			}
			return s.succeeded(ctx, t, &st, now)
		case sale.OutcomeFailed:
			switch p.State {
			case sale.PaymentStarted:
				return s.failed(ctx, t, &st, now)
			case sale.PaymentFailed:
			default:
				return fmt.Errorf("%w: payment %s is %s: the money came", sale.ErrInvalidState, p.ID, p.State)
			}
		case sale.OutcomeRefunded:
			switch p.State {
			case sale.PaymentRefundPending:
				return s.refunded(ctx, t, &st, now)
			case sale.PaymentRefunded:
			default:
				return fmt.Errorf("%w: payment %s is %s: no refund was asked for", sale.ErrInvalidState, p.ID, p.State)
			}
		default:
			return fmt.Errorf("%w: payment outcome %q", sale.ErrInvalid, n.Outcome)
		}
		st.Order, err = orderByToken(ctx, t, p.OrderToken)
		return err
	})
	return st, err
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
	if paid == 0 {
		// Cancelled (the sweeper's cancel won the order's row, and its unit is back on sale), or
		// paid by another payment: the money goes back. Of an order's late payments, the first
		// makes it REFUND_PENDING; the others find it so.
		if _, err := t.ExecContext(ctx, `UPDATE orders SET status = 'REFUND_PENDING' WHERE token = ? AND status = 'CANCELLED'`,
			token); err != nil {
			return err
		}
	}
	if st.Order, err = orderByToken(ctx, t, token); err != nil {
		return err
	}
	state, what := sale.PaymentSucceeded, sale.EventPaid
	if paid == 0 {
		state, what = sale.PaymentRefundPending, sale.EventRefundRequested
	}
	if err := setPayment(ctx, t, st, state, now); err != nil {
		return err
	}
	return s.emit(ctx, t, []sale.Event{paymentEvent(what, st.Order, st.Payment.ID, now)})
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
	var status string
	if err := t.QueryRowContext(ctx, `SELECT status FROM orders WHERE token = ?`+t.d.forUpdate(), token).Scan(&status); err != nil {
		return err
	}
	if err := setPayment(ctx, t, st, sale.PaymentRefunded, now); err != nil {
		return err
	}
	var waiting int64
	if err := t.QueryRowContext(ctx, `SELECT COUNT(*) FROM payments WHERE order_token = ? AND state = 'refund_pending'`,
		token).Scan(&waiting); err != nil {
		return err
	}
	if waiting == 0 && sale.Status(status) == sale.StatusRefundPending {
		if _, err := t.ExecContext(ctx, `UPDATE orders SET status = 'REFUNDED' WHERE token = ? AND status = 'REFUND_PENDING'`,
			token); err != nil {
			return err
		}
	}
	var err error
	if st.Order, err = orderByToken(ctx, t, token); err != nil {
		return err
	}
	return s.emit(ctx, t, []sale.Event{paymentEvent(sale.EventRefunded, st.Order, st.Payment.ID, now)})
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
