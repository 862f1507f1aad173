package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"seckill/internal/sale"
)

var _ sale.LeaderStore = (*Store)(nil)

// holding is the condition of an order that holds its share.
const holding = `status IN ('CREATED', 'PAID')`

// TopGrabs implements sale.LeaderStore: a range scan of the covering index orders_leaderboard.
func (s *Store) TopGrabs(ctx context.Context, activityID string, n int) ([]sale.Standing, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT user_id, amount_cents, created_at FROM orders
		WHERE activity_id = ? AND `+holding+`
		ORDER BY amount_cents DESC, created_at, token LIMIT ?`, activityID, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []sale.Standing{}
	for rows.Next() {
		var st sale.Standing
		var at int64
		if err := rows.Scan(&st.UserID, &st.AmountCents, &at); err != nil {
			return nil, err
		}
		st.Rank, st.GrabbedAt = int64(len(out)+1), fromMS(at)
		out = append(out, st)
	}
	return out, rows.Err()
}

// RankOf implements sale.LeaderStore: COUNT(*)+1 over the entries of the index above g.
func (s *Store) RankOf(ctx context.Context, g sale.Grab) (int64, error) {
	at := ms(g.At)
	var n int64
	err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) + 1 FROM orders
		WHERE activity_id = ? AND `+holding+` AND (amount_cents > ?
			OR amount_cents = ? AND (created_at < ? OR created_at = ? AND token < ?))`,
		g.ActivityID, g.AmountCents, g.AmountCents, at, at, g.Token).Scan(&n)
	return n, err
}

// BestGrab implements sale.LeaderStore.
func (s *Store) BestGrab(ctx context.Context, activityID, userID string) (sale.Grab, error) {
	o, err := scanOrder(s.r.QueryRowContext(ctx, `SELECT `+orderColumns+` FROM orders
		WHERE activity_id = ? AND user_id = ? AND `+holding+`
		ORDER BY amount_cents DESC, created_at, token LIMIT 1`, activityID, userID))
	if errors.Is(err, sql.ErrNoRows) {
		return sale.Grab{}, fmt.Errorf("%w: %s holds no share of %s", sale.ErrNotFound, userID, activityID)
	}
	if err != nil {
		return sale.Grab{}, err
	}
	return o.Grab(), nil
}
