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

const activityColumns = `id, name, kind, stock, price_cents, per_user_limit, start_at, end_at,
	pay_window_ms, total_cents, require_challenge, admission, created_at, rate_user, rate_ip, rate_global,
	stock_shards, queue_cap, admit_rate, draw_seed, currency, reserve_from, waves, wave_interval_ms, wave_order`

// activityRead is what a read of an activity selects: what was written at its creation, when it
// was archived, and its revision.
const activityRead = activityColumns + `, archived_at, revision`

func scanActivity(row interface{ Scan(...any) error }) (sale.Activity, error) {
	var a sale.Activity
	var start, end, window, created, archived, reserveFrom, waveInterval int64
	var challenge int
	var seed string
	err := row.Scan(&a.ID, &a.Name, &a.Kind, &a.Stock, &a.PriceCents, &a.PerUserLimit, &start, &end,
		&window, &a.TotalCents, &challenge, &a.Admission, &created, &a.Rates.PerUser, &a.Rates.PerIP, &a.Rates.Global,
		&a.StockShards, &a.QueueCap, &a.AdmitRate, &seed, &a.Currency, &reserveFrom, &a.Waves, &waveInterval, &a.WaveOrder,
		&archived, &a.Revision)
	if reserveFrom != 0 {
		a.ReserveFrom = fromMS(reserveFrom)
	}
	a.WaveInterval = time.Duration(waveInterval) * time.Millisecond
	if archived != 0 {
		a.ArchivedAt = fromMS(archived)
	}
	if err == nil && seed != "" {
		if a.Seed, err = sale.ParseSeed(seed); err != nil {
			err = fmt.Errorf("activity %s: draw seed: %w", a.ID, err)
		}
	}
	a.StartAt, a.EndAt, a.CreatedAt = fromMS(start), fromMS(end), fromMS(created)
	a.PayWindow = time.Duration(window) * time.Millisecond
	a.RequireChallenge = challenge != 0
	return a, err
}

// seedText is a seed as stored: hex, or empty for none.
func seedText(s sale.Seed) string {
	if s == (sale.Seed{}) {
		return ""
	}
	return s.String()
}

// CreateActivity implements sale.Store.
func (s *Store) CreateActivity(ctx context.Context, a sale.Activity, shares []int64) error {
	return s.inTx(ctx, func(tx tx) error {
		challenge := 0
		if a.RequireChallenge {
			challenge = 1
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO activities (`+activityColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			a.ID, a.Name, a.Kind, a.Stock, a.PriceCents, a.PerUserLimit, ms(a.StartAt), ms(a.EndAt),
			a.PayWindow.Milliseconds(), a.TotalCents, challenge, a.Admission, ms(a.CreatedAt),
			a.Rates.PerUser, a.Rates.PerIP, a.Rates.Global, max(a.StockShards, 1), a.QueueCap, a.AdmitRate, seedText(a.Seed), a.Currency,
			ms(a.ReserveFrom), a.Waves, a.WaveInterval.Milliseconds(), string(a.WaveOrder))
		if s.w.d.unique(err) {
			return fmt.Errorf("activity %s: %w", a.ID, sale.ErrExists)
		}
		if err != nil {
			return err
		}
		const chunk = 500
		for lo := 0; lo < len(shares); lo += chunk {
			hi := min(lo+chunk, len(shares))
			args := make([]any, 0, 3*(hi-lo))
			for i := lo; i < hi; i++ {
				args = append(args, a.ID, i, shares[i])
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO shares (activity_id, idx, amount_cents) VALUES `+
				placeholders(hi-lo, 3), args...); err != nil {
				return err
			}
		}
		return nil
	})
}

// Activity implements sale.Store.
func (s *Store) Activity(ctx context.Context, id string) (sale.Activity, error) {
	a, err := scanActivity(s.r.QueryRowContext(ctx, `SELECT `+activityRead+` FROM activities WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return sale.Activity{}, fmt.Errorf("activity %s: %w", id, sale.ErrNotFound)
	}
	return a, err
}

// Archive implements sale.Store.
func (s *Store) Archive(ctx context.Context, id string, at time.Time) error {
	return inTx(ctx, s.w, func(tx tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE activities SET archived_at = ? WHERE id = ? AND archived_at = 0`, ms(at), id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		return activityExists(ctx, tx, id) // archived already: the first time stands
	})
}

// activityExists returns sale.ErrNotFound when activity id is not in the database: what an
// update that changed nothing says about it.
func activityExists(ctx context.Context, t tx, id string) error {
	var one int
	err := t.QueryRowContext(ctx, `SELECT 1 FROM activities WHERE id = ?`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("activity %s: %w", id, sale.ErrNotFound)
	}
	return err
}

// Activities implements sale.Store.
func (s *Store) Activities(ctx context.Context, since time.Time) ([]sale.Activity, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+activityRead+` FROM activities WHERE end_at > ? ORDER BY created_at`, ms(since))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var acts []sale.Activity
	for rows.Next() {
		a, err := scanActivity(rows)
		if err != nil {
			return nil, err
		}
		acts = append(acts, a)
	}
	return acts, rows.Err()
}

// GateState implements sale.Store.
func (s *Store) GateState(ctx context.Context, a sale.Activity, pending []sale.Grab) (sale.GateState, error) {
	var st sale.GateState
	rows, err := s.r.QueryContext(ctx, `SELECT `+orderColumns+` FROM orders
		WHERE activity_id = ? AND (status IN ('CREATED', 'PAID') OR idem_key <> '')`, a.ID)
	if err != nil {
		return st, err
	}
	defer rows.Close()
	placed := map[string]bool{}
	for rows.Next() {
		o, err := scanOrder(rows)
		if err != nil {
			return st, err
		}
		placed[o.Token] = true
		g := o.Grab()
		if o.Status.Holds() {
			st.Held = append(st.Held, g)
		}
		if o.IdemKey != "" {
			st.Keyed = append(st.Keyed, g)
		}
	}
	if err := rows.Err(); err != nil {
		return st, err
	}
	// A grab can be both queued and placed when the worker died between placing and acking.
	var unknown []string
	for _, g := range pending {
		if g.ActivityID == a.ID && !placed[g.Token] {
			unknown = append(unknown, g.Token)
		}
	}
	ordered, err := s.tokensWithOrders(ctx, unknown)
	if err != nil {
		return st, err
	}
	var queuedShares = map[int64]bool{}
	for _, g := range pending {
		if g.ActivityID != a.ID || placed[g.Token] || ordered[g.Token] {
			continue
		}
		st.Held = append(st.Held, g)
		if g.IdempotencyKey != "" {
			st.Keyed = append(st.Keyed, g)
		}
		queuedShares[g.Share] = true
	}
	if a.Kind != sale.KindRedPacket {
		return st, nil
	}
	srows, err := s.r.QueryContext(ctx, `SELECT idx, amount_cents FROM shares
		WHERE activity_id = ? AND holder IS NULL ORDER BY idx`, a.ID)
	if err != nil {
		return st, err
	}
	defer srows.Close()
	for srows.Next() {
		var sh sale.Share
		if err := srows.Scan(&sh.Index, &sh.AmountCents); err != nil {
			return st, err
		}
		if !queuedShares[sh.Index] {
			st.Shares = append(st.Shares, sh)
		}
	}
	return st, srows.Err()
}

// tokensWithOrders returns which of tokens have an order (cancelled ones too), asking for 500 at
// a time: a long queue costs a few queries, not one per grab.
func (s *Store) tokensWithOrders(ctx context.Context, tokens []string) (map[string]bool, error) {
	const chunk = 500
	found := map[string]bool{}
	for lo := 0; lo < len(tokens); lo += chunk {
		hi := min(lo+chunk, len(tokens))
		args := make([]any, hi-lo)
		for i, t := range tokens[lo:hi] {
			args[i] = t
		}
		rows, err := s.r.QueryContext(ctx, `SELECT token FROM orders WHERE token IN (`+
			strings.TrimSuffix(strings.Repeat("?,", hi-lo), ",")+`)`, args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var tok string
			if err := rows.Scan(&tok); err != nil {
				rows.Close()
				return nil, err
			}
			found[tok] = true
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return found, nil
}
