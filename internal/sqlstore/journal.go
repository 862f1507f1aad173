package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"seckill/internal/sale"
)

// Journal is the embedded mode's queue: every acknowledged grab, in a SQLite file of its own
// beside the database (PATH.queue), so that the gate's group commits and the worker's order
// transactions each have a writer.
type Journal struct {
	w db
	r db
}

// OpenJournal opens the journal that belongs to the database named by dsn: for sqlite:PATH a file
// of its own at PATH.queue; for MySQL and PostgreSQL the grabs table of that database.
func OpenJournal(ctx context.Context, dsn string) (*Journal, error) {
	d, w, r, err := openDSN(ctx, dsn, ".queue", "migrations/sqlite-journal", DefaultConns)
	if err != nil {
		return nil, err
	}
	return &Journal{w: db{DB: w, d: d}, r: db{DB: r, d: d}}, nil
}

// Close closes the journal.
func (s *Journal) Close() error {
	if s.r.DB == s.w.DB {
		return s.w.Close()
	}
	return errors.Join(s.r.Close(), s.w.Close())
}

// Ping reports whether the journal answers.
func (s *Journal) Ping(ctx context.Context) error {
	if err := s.r.PingContext(ctx); err != nil {
		return fmt.Errorf("%w: journal: %v", sale.ErrBusy, err)
	}
	return nil
}

const grabColumns = `seq, token, activity_id, user_id, idem_key, share_idx, amount_cents, grabbed_at, trace`

// AppendGrabs stores acknowledged grabs in one transaction, many rows per statement. A token
// already there is left alone, so replaying a batch is harmless.
func (s *Journal) AppendGrabs(ctx context.Context, gs []sale.Grab) error {
	return inTx(ctx, s.w, func(tx tx) error {
		const chunk = 256
		for lo := 0; lo < len(gs); lo += chunk {
			hi := min(lo+chunk, len(gs))
			args := make([]any, 0, 8*(hi-lo))
			for _, g := range gs[lo:hi] {
				args = append(args, g.Token, g.ActivityID, g.UserID, g.IdempotencyKey, g.Share, g.AmountCents, ms(g.At), g.Trace)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO grabs (token, activity_id, user_id, idem_key, share_idx,
				amount_cents, grabbed_at, trace) VALUES `+placeholders(hi-lo, 8)+` ON CONFLICT DO NOTHING`, args...); err != nil {
				return fmt.Errorf("append %d grabs: %w", hi-lo, err)
			}
		}
		return nil
	})
}

func scanGrab(row interface{ Scan(...any) error }) (int64, sale.Grab, error) {
	var seq, at int64
	var g sale.Grab
	err := row.Scan(&seq, &g.Token, &g.ActivityID, &g.UserID, &g.IdempotencyKey, &g.Share, &g.AmountCents, &at, &g.Trace)
	g.At = fromMS(at)
	return seq, g, err
}

// QueuedGrabs returns up to limit queued grabs with a sequence above after, oldest first.
func (s *Journal) QueuedGrabs(ctx context.Context, after int64, limit int) ([]sale.Delivery, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+grabColumns+` FROM grabs WHERE seq > ? ORDER BY seq LIMIT ?`,
		after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sale.Delivery
	for rows.Next() {
		seq, g, err := scanGrab(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sale.Delivery{ID: strconv.FormatInt(seq, 10), Grab: g, Attempts: 1})
	}
	return out, rows.Err()
}

// RemoveGrabs deletes grabs whose orders are placed.
func (s *Journal) RemoveGrabs(ctx context.Context, tokens []string) error {
	if len(tokens) == 0 {
		return nil
	}
	return inTx(ctx, s.w, func(tx tx) error {
		const chunk = 500
		for lo := 0; lo < len(tokens); lo += chunk {
			hi := min(lo+chunk, len(tokens))
			args := make([]any, hi-lo)
			for i, t := range tokens[lo:hi] {
				args[i] = t
			}
			q := `DELETE FROM grabs WHERE token IN (` + strings.TrimSuffix(strings.Repeat("?,", hi-lo), ",") + `)`
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return err
			}
		}
		return nil
	})
}

// QueuedGrab returns the grab of token while it waits for its order. Errors: sale.ErrNotFound.
func (s *Journal) QueuedGrab(ctx context.Context, token string) (sale.Grab, error) {
	_, g, err := scanGrab(s.r.QueryRowContext(ctx, `SELECT `+grabColumns+` FROM grabs WHERE token = ?`, token))
	if errors.Is(err, sql.ErrNoRows) {
		return sale.Grab{}, fmt.Errorf("grab %s: %w", token, sale.ErrNotFound)
	}
	return g, err
}

// QueueDepth counts an activity's grabs waiting for their orders.
func (s *Journal) QueueDepth(ctx context.Context, activityID string) (int64, error) {
	var n int64
	err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM grabs WHERE activity_id = ?`, activityID).Scan(&n)
	return n, err
}

// UnackedGrabs returns an activity's grabs waiting for their orders.
func (s *Journal) UnackedGrabs(ctx context.Context, activityID string) ([]sale.Grab, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+grabColumns+` FROM grabs WHERE activity_id = ? ORDER BY seq`,
		activityID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sale.Grab
	for rows.Next() {
		_, g, err := scanGrab(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, rows.Err()
}
