package sqlstore

import (
	"context"

	"seckill/internal/sale"
)

// Record implements sale.AuditStore.
func (s *Store) Record(ctx context.Context, e sale.AuditEntry) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO audit_log (at_ms, actor, action, target, remote, status) VALUES (?, ?, ?, ?, ?, ?)`,
		ms(e.At), e.Actor, e.Action, e.Target, e.Remote, e.Status)
	return err
}

// Entries implements sale.AuditStore.
func (s *Store) Entries(ctx context.Context, before int64, limit int) ([]sale.AuditEntry, error) {
	q, args := `SELECT id, at_ms, actor, action, target, remote, status FROM audit_log ORDER BY id DESC LIMIT ?`, []any{limit}
	if before > 0 {
		q, args = `SELECT id, at_ms, actor, action, target, remote, status FROM audit_log WHERE id < ? ORDER BY id DESC LIMIT ?`,
			[]any{before, limit}
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []sale.AuditEntry{}
	for rows.Next() {
		var e sale.AuditEntry
		var at int64
		if err := rows.Scan(&e.ID, &at, &e.Actor, &e.Action, &e.Target, &e.Remote, &e.Status); err != nil {
			return nil, err
		}
		e.At = fromMS(at)
		out = append(out, e)
	}
	return out, rows.Err()
}
