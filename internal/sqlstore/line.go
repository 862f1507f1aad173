package sqlstore

import (
	"context"
	"errors"
	"fmt"

	"seckill/internal/sale"
)

var _ sale.LineJournal = (*LineJournal)(nil)

// LineJournal is the record of the embedded mode's waiting lines, in a SQLite file of its own
// beside the database (PATH.line), so that a crowd joining a line has a writer of its own.
type LineJournal struct {
	w db
	r db
}

// OpenLineJournal opens the line journal that belongs to the database named by dsn: for
// sqlite:PATH a file of its own at PATH.line; for MySQL and PostgreSQL tables of that database.
func OpenLineJournal(ctx context.Context, dsn string) (*LineJournal, error) {
	d, w, r, err := openDSN(ctx, dsn, ".line", "migrations/sqlite-line", DefaultConns)
	if err != nil {
		return nil, err
	}
	return &LineJournal{w: db{DB: w, d: d}, r: db{DB: r, d: d}}, nil
}

// Close closes the journal.
func (s *LineJournal) Close() error {
	if s.r.DB == s.w.DB {
		return s.w.Close()
	}
	return errors.Join(s.r.Close(), s.w.Close())
}

// AppendTickets implements sale.LineJournal, many rows per statement.
func (s *LineJournal) AppendTickets(ctx context.Context, ts []sale.TicketRow) error {
	return inTx(ctx, s.w, func(tx tx) error {
		const chunk = 256
		for lo := 0; lo < len(ts); lo += chunk {
			hi := min(lo+chunk, len(ts))
			args := make([]any, 0, 7*(hi-lo))
			for _, t := range ts[lo:hi] {
				args = append(args, t.Seq, t.Token, t.ActivityID, t.UserID, t.Place, ms(t.JoinedAt), t.Key)
			}
			if _, err := tx.ExecContext(ctx, s.w.d.rewrite(`INSERT INTO line_tickets (seq, token, activity_id, user_id, place, joined_at,
				idem_key) VALUES `+placeholders(hi-lo, 7)), args...); err != nil {
				return fmt.Errorf("append %d tickets: %w", hi-lo, err)
			}
		}
		return nil
	})
}

// ensureLine inserts a line's row unless it exists. (One process writes a line, one write at a
// time: the embedded line's lock, so reading first is no race.)
func ensureLine(ctx context.Context, tx tx, activityID string) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM line_states WHERE activity_id = ?`, activityID).Scan(&n); err != nil || n > 0 {
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO line_states (activity_id, sealed, head) VALUES (?, 0, 0)`, activityID)
	return err
}

// SealLine implements sale.LineJournal.
func (s *LineJournal) SealLine(ctx context.Context, activityID string) error {
	return inTx(ctx, s.w, func(tx tx) error {
		if err := ensureLine(ctx, tx, activityID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE line_states SET sealed = 1 WHERE activity_id = ?`, activityID)
		return err
	})
}

// DropLine implements sale.LineJournal.
func (s *LineJournal) DropLine(ctx context.Context, activityID string) error {
	return inTx(ctx, s.w, func(tx tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM line_tickets WHERE activity_id = ?`, activityID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM line_states WHERE activity_id = ?`, activityID)
		return err
	})
}

// AdmitTickets implements sale.LineJournal. The head moves only from from: a second call for
// the same batch changes nothing.
func (s *LineJournal) AdmitTickets(ctx context.Context, activityID string, from, to int64, ts []sale.TicketRow) error {
	return inTx(ctx, s.w, func(tx tx) error {
		if err := ensureLine(ctx, tx, activityID); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE line_states SET head = ? WHERE activity_id = ? AND head = ?`,
			to, activityID, from)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		for _, t := range ts {
			if _, err := tx.ExecContext(ctx, `UPDATE line_tickets SET outcome = ?, order_token = ?, amount_cents = ?
				WHERE seq = ?`, string(t.Outcome), t.OrderToken, t.AmountCents, t.Seq); err != nil {
				return err
			}
		}
		return nil
	})
}

// LoadLines implements sale.LineJournal.
func (s *LineJournal) LoadLines(ctx context.Context) ([]sale.LineRecord, error) {
	var out []sale.LineRecord
	at := map[string]int{}
	rec := func(id string) *sale.LineRecord {
		i, ok := at[id]
		if !ok {
			i = len(out)
			at[id] = i
			out = append(out, sale.LineRecord{ActivityID: id})
		}
		return &out[i]
	}
	rows, err := s.r.QueryContext(ctx, `SELECT activity_id, sealed, head FROM line_states`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id string
		var sealed int
		var head int64
		if err := rows.Scan(&id, &sealed, &head); err != nil {
			rows.Close()
			return nil, err
		}
		r := rec(id)
		r.Sealed, r.Head = sealed != 0, head
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	rows, err = s.r.QueryContext(ctx, `SELECT seq, token, activity_id, user_id, place, joined_at, outcome, order_token,
		amount_cents, idem_key FROM line_tickets ORDER BY seq`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var t sale.TicketRow
		var joined int64
		var outcome string
		if err := rows.Scan(&t.Seq, &t.Token, &t.ActivityID, &t.UserID, &t.Place, &joined, &outcome, &t.OrderToken,
			&t.AmountCents, &t.Key); err != nil {
			return nil, err
		}
		t.JoinedAt, t.Outcome, t.Early = fromMS(joined), sale.Outcome(outcome), t.Place < 0
		r := rec(t.ActivityID)
		r.Tickets = append(r.Tickets, t)
	}
	return out, rows.Err()
}
