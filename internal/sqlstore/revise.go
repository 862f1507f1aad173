package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"seckill/internal/sale"
)

// ReviseActivity implements sale.Store. What an operator may change is written; what a sale
// was built on (its kind, admission, shards, split and seed) is not. The stock may not fall
// below the units sold: the database stays the final guard.
func (s *Store) ReviseActivity(ctx context.Context, a sale.Activity, r sale.Revision) error {
	return s.inTx(ctx, func(tx tx) error {
		challenge := 0
		if a.RequireChallenge {
			challenge = 1
		}
		res, err := tx.ExecContext(ctx, `UPDATE activities SET name = ?, stock = ?, price_cents = ?, per_user_limit = ?,
			start_at = ?, end_at = ?, pay_window_ms = ?, require_challenge = ?, rate_user = ?, rate_ip = ?, rate_global = ?,
			revision = ? WHERE id = ? AND revision = ? AND sold <= ?`,
			a.Name, a.Stock, a.PriceCents, a.PerUserLimit, ms(a.StartAt), ms(a.EndAt), a.PayWindow.Milliseconds(), challenge,
			a.Rates.PerUser, a.Rates.PerIP, a.Rates.Global, a.Revision, a.ID, a.Revision-1, a.Stock)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			var rev, sold int64
			switch err := tx.QueryRowContext(ctx, `SELECT revision, sold FROM activities WHERE id = ?`, a.ID).Scan(&rev, &sold); {
			case errors.Is(err, sql.ErrNoRows):
				return fmt.Errorf("activity %s: %w", a.ID, sale.ErrNotFound)
			case err != nil:
				return err
			case rev != a.Revision-1:
				return fmt.Errorf("activity %s is at revision %d, not %d: %w", a.ID, rev, a.Revision-1, sale.ErrChanged)
			default:
				return fmt.Errorf("%w: activity %s has sold %d units, more than a stock of %d", sale.ErrInvalid, a.ID, sold, a.Stock)
			}
		}
		reload := 0
		if r.Reload {
			reload = 1
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO activity_revisions (activity_id, revision, add_units, reload, at_ms, given_at)
			VALUES (?, ?, ?, ?, ?, 0)`, a.ID, a.Revision, r.Add, reload, ms(time.Now()))
		return err
	})
}

// Unrevised implements sale.Store.
// The revisions are ordered by their numbers, never by at_ms: that is each node's own clock, and
// the nodes' clocks disagree.
func (s *Store) Unrevised(ctx context.Context, id string, limit int) ([]sale.Revision, error) {
	q, args := `SELECT activity_id, revision, add_units, reload, at_ms FROM activity_revisions WHERE given_at = 0`, []any{}
	if id != "" {
		q, args = q+` AND activity_id = ?`, append(args, id)
	}
	rows, err := s.r.QueryContext(ctx, q+` ORDER BY activity_id, revision LIMIT ?`, append(args, limit)...)
	return collect(rows, err, func(row interface{ Scan(...any) error }) (sale.Revision, error) {
		var r sale.Revision
		var at, reload int64
		err := row.Scan(&r.ActivityID, &r.Revision, &r.Add, &reload, &at)
		r.At, r.Reload = fromMS(at), reload != 0
		return r, err
	})
}

// Revised implements sale.Store.
func (s *Store) Revised(ctx context.Context, id string, rev int64) error {
	_, err := s.w.ExecContext(ctx, `UPDATE activity_revisions SET given_at = ? WHERE activity_id = ? AND revision = ? AND given_at = 0`,
		ms(time.Now()), id, rev)
	return err
}
