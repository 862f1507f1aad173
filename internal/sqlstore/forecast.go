package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"seckill/internal/sale"
)

// arrivalsChunk bounds the rows (seconds, or users) one statement of AddArrivals names.
const arrivalsChunk = 500

// AddArrivals implements sale.ForecastStore: each second's requests are added to the row of that
// second (made by the first node to count one), and the users' reservations marked clicked, in
// one transaction.
func (s *Store) AddArrivals(ctx context.Context, activityID string, perSecond map[int64]int64, users []string) error {
	seconds := make([]int64, 0, len(perSecond))
	for sec := range perSecond {
		seconds = append(seconds, sec)
	}
	slices.Sort(seconds) // the same order on every node: no deadlock between two adding at once
	return s.inTx(ctx, func(t tx) error {
		for chunk := range slices.Chunk(seconds, arrivalsChunk) {
			args := make([]any, 0, 3*len(chunk))
			for _, sec := range chunk {
				args = append(args, activityID, sec, perSecond[sec])
			}
			// Built per chunk: rewritten without the dialect's cache.
			if _, err := t.Tx.ExecContext(ctx, t.d.rewrite(`INSERT INTO arrivals (activity_id, at_s, requests) VALUES `+
				placeholders(len(chunk), 3)+t.d.addTo("arrivals", "requests", "activity_id", "at_s")), args...); err != nil {
				return fmt.Errorf("add %d seconds of arrivals of %s: %w", len(chunk), activityID, err)
			}
		}
		for chunk := range slices.Chunk(users, arrivalsChunk) {
			args := []any{activityID}
			for _, u := range chunk {
				args = append(args, u)
			}
			if _, err := t.Tx.ExecContext(ctx, t.d.rewrite(`UPDATE reservations SET clicked = 1 WHERE activity_id = ? AND clicked = 0
				AND user_id IN `+placeholders(1, len(chunk))), args...); err != nil {
				return fmt.Errorf("mark %d reservers of %s clicked: %w", len(chunk), activityID, err)
			}
		}
		return nil
	})
}

// Arrivals implements sale.ForecastStore.
func (s *Store) Arrivals(ctx context.Context, activityID string) (map[int64]int64, int64, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT at_s, requests FROM arrivals WHERE activity_id = ?`, activityID)
	type second struct{ at, n int64 }
	secs, err := collect(rows, err, func(row interface{ Scan(...any) error }) (second, error) {
		var x second
		return x, row.Scan(&x.at, &x.n)
	})
	if err != nil {
		return nil, 0, err
	}
	perSecond := make(map[int64]int64, len(secs))
	for _, x := range secs {
		perSecond[x.at] = x.n
	}
	var clicked int64
	err = s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM reservations WHERE activity_id = ? AND clicked = 1`, activityID).Scan(&clicked)
	return perSecond, clicked, err
}

// KeepHistory implements sale.ForecastStore.
func (s *Store) KeepHistory(ctx context.Context, h sale.SaleHistory) error {
	spread := make([]string, len(h.Spread))
	for i, x := range h.Spread {
		spread[i] = strconv.FormatFloat(x, 'f', 4, 64)
	}
	return s.inTx(ctx, func(t tx) error {
		if _, err := t.ExecContext(ctx, `INSERT INTO reservation_history (activity_id, archived_at_ms, reserved, buyers, clicks, waves,
			wave_interval_s, peak_rps, peak_factor, spread) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`+t.d.keepFirst("activity_id"),
			h.ActivityID, ms(h.ArchivedAt), h.Reserved, h.Buyers, h.Clicks, h.Waves, int64(h.WaveInterval/time.Second), h.PeakRPS,
			h.PeakFactor, strings.Join(spread, ",")); err != nil {
			return fmt.Errorf("keep the history of %s: %w", h.ActivityID, err)
		}
		_, err := t.ExecContext(ctx, `DELETE FROM arrivals WHERE activity_id = ?`, h.ActivityID)
		return err
	})
}

// History implements sale.ForecastStore.
func (s *Store) History(ctx context.Context, limit int) ([]sale.SaleHistory, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT activity_id, archived_at_ms, reserved, buyers, clicks, waves, wave_interval_s, peak_rps,
		peak_factor, spread FROM reservation_history ORDER BY archived_at_ms DESC, activity_id LIMIT ?`, limit)
	return collect(rows, err, func(row interface{ Scan(...any) error }) (sale.SaleHistory, error) {
		var h sale.SaleHistory
		var at, interval int64
		var spread string
		if err := row.Scan(&h.ActivityID, &at, &h.Reserved, &h.Buyers, &h.Clicks, &h.Waves, &interval, &h.PeakRPS, &h.PeakFactor, &spread); err != nil {
			return h, err
		}
		h.ArchivedAt, h.WaveInterval = fromMS(at), time.Duration(interval)*time.Second
		for f := range strings.SplitSeq(spread, ",") {
			x, err := strconv.ParseFloat(f, 64)
			if err != nil {
				return h, fmt.Errorf("the spread of %s: %w", h.ActivityID, err)
			}
			h.Spread = append(h.Spread, x)
		}
		return h, nil
	})
}
