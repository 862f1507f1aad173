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

// Orders implements sale.Store.
func (s *Store) Orders(ctx context.Context, f sale.OrderFilter) ([]sale.Order, error) {
	var where []string
	var args []any
	if f.ActivityID != "" {
		where, args = append(where, "activity_id = ?"), append(args, f.ActivityID)
	}
	if f.UserID != "" {
		where, args = append(where, "user_id = ?"), append(args, f.UserID)
	}
	if f.Before > 0 {
		where, args = append(where, "id < ?"), append(args, f.Before)
	}
	q := `SELECT ` + orderColumns + ` FROM orders`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	rows, err := s.r.QueryContext(ctx, q+` ORDER BY id DESC LIMIT ?`, append(args, f.Limit)...)
	return collect(rows, err, scanOrder)
}

// exportPage is how many orders EachOrder reads at a time.
const exportPage = 1000

// EachOrder implements sale.Store: pages of exportPage by id, so that a large export holds no
// transaction open and no more than a page in memory.
func (s *Store) EachOrder(ctx context.Context, activityID string, fn func(sale.Order) error) error {
	var after int64
	for {
		rows, err := s.r.QueryContext(ctx, `SELECT `+orderColumns+` FROM orders WHERE activity_id = ? AND id > ?
			ORDER BY id LIMIT ?`, activityID, after, exportPage)
		page, err := collect(rows, err, scanOrder)
		if err != nil {
			return err
		}
		for _, o := range page {
			if err := fn(o); err != nil {
				return err
			}
			after = o.ID
		}
		if len(page) < exportPage {
			return nil
		}
	}
}

const deadLetterColumns = `token, activity_id, user_id, attempts, reason, created_at, idem_key, share_idx, amount_cents, grabbed_at`

func scanDeadLetter(row interface{ Scan(...any) error }) (sale.DeadLetter, error) {
	var d sale.DeadLetter
	var at, grabbed int64
	g := &d.Grab
	err := row.Scan(&g.Token, &g.ActivityID, &g.UserID, &d.Attempts, &d.Reason, &at, &g.IdempotencyKey, &g.Share, &g.AmountCents, &grabbed)
	d.At, g.At = fromMS(at), fromMS(grabbed)
	return d, err
}

// DeadLetters implements sale.Store.
func (s *Store) DeadLetters(ctx context.Context, activityID string, limit int) ([]sale.DeadLetter, error) {
	q, args := `SELECT `+deadLetterColumns+` FROM dead_letters`, []any{}
	if activityID != "" {
		q, args = q+` WHERE activity_id = ?`, append(args, activityID)
	}
	rows, err := s.r.QueryContext(ctx, q+` ORDER BY created_at DESC, token LIMIT ?`, append(args, limit)...)
	return collect(rows, err, scanDeadLetter)
}

// ReplayDeadLetter implements sale.Store. The dead letter is read and deleted in the
// transaction that places its grab: two operators replaying it at once place it once. The
// order keeps its grab's time as its creation, and its payment window opens at now.
func (s *Store) ReplayDeadLetter(ctx context.Context, token string, now time.Time) (sale.Placement, error) {
	var pl sale.Placement
	err := s.inTx(ctx, func(t tx) error {
		d, err := scanDeadLetter(t.QueryRowContext(ctx, `SELECT `+deadLetterColumns+` FROM dead_letters WHERE token = ?`+t.d.forUpdate(), token))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("dead letter %s: %w", token, sale.ErrNotFound)
		case err != nil:
			return err
		case d.Grab.At.IsZero():
			return fmt.Errorf("%w: dead letter %s was kept without its grab (before this version): it cannot be replayed", sale.ErrInvalid, token)
		}
		p := &placer{tx: t, guards: map[string]guard{}}
		defer p.close()
		if pl, err = p.place(ctx, d.Grab, later(now, d.Grab.At)); err != nil {
			return fmt.Errorf("replay dead letter %s: %w", token, err)
		}
		if _, err := t.ExecContext(ctx, `DELETE FROM dead_letters WHERE token = ?`, token); err != nil {
			return err
		}
		return s.emit(ctx, t, placedEvents([]sale.Placement{pl}))
	})
	return pl, err
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
