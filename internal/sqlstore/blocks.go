package sqlstore

import (
	"context"
	"fmt"
	"time"

	"seckill/internal/sale"
)

// AddBlock implements sale.Store: the entry replaces any of the same kind and value, in one
// transaction.
func (s *Store) AddBlock(ctx context.Context, b sale.Block) error {
	return s.inTx(ctx, func(tx tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM blocks WHERE kind = ? AND value = ?`, string(b.Kind), b.Value); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO blocks (kind, value, reason, until_ms, created_at) VALUES (?, ?, ?, ?, ?)`,
			string(b.Kind), b.Value, b.Reason, ms(b.Until), ms(b.CreatedAt)) // 0: no end
		return err
	})
}

// RemoveBlock implements sale.Store.
func (s *Store) RemoveBlock(ctx context.Context, kind sale.BlockKind, value string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM blocks WHERE kind = ? AND value = ?`, string(kind), value)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return fmt.Errorf("blacklist entry %s %s: %w", kind, value, sale.ErrNotFound)
	}
	return nil
}

// Blocks implements sale.Store.
func (s *Store) Blocks(ctx context.Context, now time.Time) ([]sale.Block, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT kind, value, reason, until_ms, created_at FROM blocks
		WHERE until_ms = 0 OR until_ms > ? ORDER BY kind, value`, ms(now))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sale.Block
	for rows.Next() {
		var b sale.Block
		var kind string
		var until, created int64
		if err := rows.Scan(&kind, &b.Value, &b.Reason, &until, &created); err != nil {
			return nil, err
		}
		b.Kind, b.Until, b.CreatedAt = sale.BlockKind(kind), fromMS(until), fromMS(created)
		out = append(out, b)
	}
	return out, rows.Err()
}
