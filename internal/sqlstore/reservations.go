package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"seckill/internal/sale"
)

var _ sale.ReservationStore = (*Store)(nil)

// The states of an activity's reservations (activities.reservations_state).
const (
	reservationsOpen     = 0
	reservationsClosed   = 1 // the count is final
	reservationsAssigned = 2 // and every reservation has its wave
)

// Reserve implements sale.ReservationStore. The activity's row is locked first: the
// reservations of one activity are numbered one at a time, in the order they commit, and a
// buyer's second reservation at once with the first finds the first.
func (s *Store) Reserve(ctx context.Context, activityID, userID string, now time.Time) (sale.Reservation, bool, error) {
	var r sale.Reservation
	var created bool
	err := s.inTx(ctx, func(t tx) error {
		created = false
		var reserved, state int64
		err := t.QueryRowContext(ctx, `SELECT reserved, reservations_state FROM activities WHERE id = ?`+t.d.forUpdate(),
			activityID).Scan(&reserved, &state)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("activity %s: %w", activityID, sale.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if r, err = reservationOf(ctx, t, activityID, userID); !errors.Is(err, sale.ErrNotFound) {
			return err // found (nil), or failed
		}
		if state != reservationsOpen {
			return fmt.Errorf("activity %s: %w", activityID, sale.ErrReservationsClosed)
		}
		r = sale.Reservation{ActivityID: activityID, UserID: userID, Number: reserved + 1, ReservedAt: fromMS(ms(now))}
		if _, err := t.ExecContext(ctx, `UPDATE activities SET reserved = ? WHERE id = ?`, r.Number, activityID); err != nil {
			return err
		}
		if _, err := t.ExecContext(ctx, `INSERT INTO reservations (activity_id, user_id, number, reserved_at, wave)
			VALUES (?, ?, ?, ?, 0)`, activityID, userID, r.Number, ms(now)); err != nil {
			return err
		}
		created = true
		return nil
	})
	return r, created, err
}

const reservationColumns = `activity_id, user_id, number, reserved_at, wave`

func scanReservation(row interface{ Scan(...any) error }) (sale.Reservation, error) {
	var r sale.Reservation
	var at int64
	err := row.Scan(&r.ActivityID, &r.UserID, &r.Number, &at, &r.Wave)
	r.ReservedAt = fromMS(at)
	return r, err
}

func reservationOf(ctx context.Context, q querier, activityID, userID string) (sale.Reservation, error) {
	r, err := scanReservation(q.QueryRowContext(ctx, `SELECT `+reservationColumns+` FROM reservations
		WHERE activity_id = ? AND user_id = ?`, activityID, userID))
	if errors.Is(err, sql.ErrNoRows) {
		return sale.Reservation{}, fmt.Errorf("reservation of %s by %s: %w", activityID, userID, sale.ErrNotFound)
	}
	return r, err
}

// Reservation implements sale.ReservationStore.
func (s *Store) Reservation(ctx context.Context, activityID, userID string) (sale.Reservation, error) {
	return reservationOf(ctx, s.r, activityID, userID)
}

// Reservations implements sale.ReservationStore.
func (s *Store) Reservations(ctx context.Context, activityID string, after int64, limit int) ([]sale.Reservation, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+reservationColumns+` FROM reservations
		WHERE activity_id = ? AND number > ? ORDER BY number LIMIT ?`, activityID, after, limit)
	return collect(rows, err, scanReservation)
}

// setWavesChunk bounds the numbers of one UPDATE of SetWaves.
const setWavesChunk = 500

// SetWaves implements sale.ReservationStore: one UPDATE per wave and chunk of numbers, in one
// transaction.
func (s *Store) SetWaves(ctx context.Context, activityID string, waves map[int64]int64) error {
	byWave := map[int64][]int64{}
	for number, wave := range waves {
		byWave[wave] = append(byWave[wave], number)
	}
	return s.inTx(ctx, func(t tx) error {
		for _, wave := range slices.Sorted(maps.Keys(byWave)) {
			numbers := byWave[wave]
			slices.Sort(numbers)
			for chunk := range slices.Chunk(numbers, setWavesChunk) {
				args := []any{wave, activityID}
				for _, n := range chunk {
					args = append(args, n)
				}
				// Built per chunk: rewritten without the dialect's cache.
				if _, err := t.Tx.ExecContext(ctx, t.d.rewrite(`UPDATE reservations SET wave = ? WHERE activity_id = ? AND number IN `+
					placeholders(1, len(chunk))), args...); err != nil {
					return fmt.Errorf("set wave %d of %d reservations of %s: %w", wave, len(chunk), activityID, err)
				}
			}
		}
		return nil
	})
}

// Reserved implements sale.ReservationStore: the activity row's counter.
func (s *Store) Reserved(ctx context.Context, activityID string) (int64, error) {
	var n int64
	err := s.r.QueryRowContext(ctx, `SELECT reserved FROM activities WHERE id = ?`, activityID).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("activity %s: %w", activityID, sale.ErrNotFound)
	}
	return n, err
}

// CloseReservations implements sale.ReservationStore: under the activity row's lock, which
// every reservation takes first, so that none commits after the count is read.
func (s *Store) CloseReservations(ctx context.Context, activityID string) (int64, bool, error) {
	var n, state int64
	err := s.inTx(ctx, func(t tx) error {
		err := t.QueryRowContext(ctx, `SELECT reserved, reservations_state FROM activities WHERE id = ?`+t.d.forUpdate(),
			activityID).Scan(&n, &state)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("activity %s: %w", activityID, sale.ErrNotFound)
		}
		if err != nil || state != reservationsOpen {
			return err
		}
		state = reservationsClosed
		_, err = t.ExecContext(ctx, `UPDATE activities SET reservations_state = ? WHERE id = ?`, state, activityID)
		return err
	})
	return n, state == reservationsAssigned, err
}

// WavesAssigned implements sale.ReservationStore.
func (s *Store) WavesAssigned(ctx context.Context, activityID string) error {
	_, err := s.w.ExecContext(ctx, `UPDATE activities SET reservations_state = ? WHERE id = ? AND reservations_state = ?`,
		reservationsAssigned, activityID, reservationsClosed)
	return err
}

// RemindWave implements sale.ReservationStore: the activity row's last wave reminded moves to
// e's and the event is written in the same transaction, or neither.
func (s *Store) RemindWave(ctx context.Context, e sale.Event) (bool, error) {
	if e.Wave == nil {
		return false, fmt.Errorf("%w: event %s reminds of no wave", sale.ErrInvalid, e.ID)
	}
	sent := false
	err := s.inTx(ctx, func(t tx) error {
		res, err := t.ExecContext(ctx, `UPDATE activities SET reminded_waves = ? WHERE id = ? AND reminded_waves < ?`,
			e.Wave.Wave, e.Wave.ActivityID, e.Wave.Wave)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err == nil {
				err = activityExists(ctx, t, e.Wave.ActivityID)
			}
			return err
		}
		sent = true
		return s.emit(ctx, t, []sale.Event{e})
	})
	return sent, err
}

// WaveStats implements sale.ReservationStore: the reservations of the activity joined with
// each reserver's orders of it (a user's orders counted once: grabbed if any, won if one holds
// its unit).
func (s *Store) WaveStats(ctx context.Context, activityID string) ([]sale.WaveStats, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT r.wave, COUNT(*), COUNT(o.user_id), COALESCE(SUM(o.holds), 0)
		FROM reservations r
		LEFT JOIN (SELECT user_id, MAX(CASE WHEN status IN (?, ?) THEN 1 ELSE 0 END) AS holds
			FROM orders WHERE activity_id = ? GROUP BY user_id) o ON o.user_id = r.user_id
		WHERE r.activity_id = ?
		GROUP BY r.wave ORDER BY r.wave`, string(sale.StatusCreated), string(sale.StatusPaid), activityID, activityID)
	return collect(rows, err, func(row interface{ Scan(...any) error }) (sale.WaveStats, error) {
		var w sale.WaveStats
		err := row.Scan(&w.Wave, &w.Reserved, &w.Grabbed, &w.Won)
		return w, err
	})
}
