package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"seckill/internal/sale"
)

// testReservations: a reservation sale's settings round-trip; reservations are numbered from 1
// in the order they commit, one per buyer however often (or however many at once) they reserve;
// they list by number, page after page; their waves are recorded at the close.
func testReservations(t *testing.T, dsn string) {
	ctx := context.Background()
	s := openStore(t, dsn)
	a := item("res", 10, 1)
	a.Admission, a.ReserveFrom, a.Waves, a.WaveInterval, a.WaveOrder = sale.AdmitReservation, t0.Add(-48*time.Hour), 3, 10*time.Minute, sale.WaveDrawn
	create(t, s, a)
	got, err := s.Activity(ctx, a.ID)
	if err != nil || !got.ReserveFrom.Equal(a.ReserveFrom) || got.Waves != 3 || got.WaveInterval != 10*time.Minute || got.WaveOrder != sale.WaveDrawn {
		t.Fatalf("the activity read back: %+v, %v", got, err)
	}
	if _, _, err := s.Reserve(ctx, "nope", "u1", t0); !errors.Is(err, sale.ErrNotFound) {
		t.Errorf("a reservation of no activity: %v", err)
	}
	if _, err := s.Reservation(ctx, a.ID, "u1"); !errors.Is(err, sale.ErrNotFound) {
		t.Errorf("no reservation yet: %v", err)
	}
	// 40 buyers reserve at once, each twice: 40 reservations numbered 1 to 40, each buyer's
	// second answer its first.
	const buyers = 40
	var wg sync.WaitGroup
	var mu sync.Mutex
	numbers := map[string][]int64{}
	created := 0
	for i := range buyers {
		for range 2 {
			wg.Go(func() {
				u := fmt.Sprintf("u%02d", i)
				r, isNew, err := s.Reserve(ctx, a.ID, u, t0.Add(time.Duration(i)*time.Second))
				if err != nil {
					t.Errorf("reserve %s: %v", u, err)
					return
				}
				mu.Lock()
				numbers[u] = append(numbers[u], r.Number)
				if isNew {
					created++
				}
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	seen := map[int64]string{}
	for u, ns := range numbers {
		if len(ns) != 2 || ns[0] != ns[1] {
			t.Errorf("%s got numbers %v; want one, twice", u, ns)
		}
		if other, dup := seen[ns[0]]; dup {
			t.Errorf("number %d given to %s and %s", ns[0], u, other)
		}
		seen[ns[0]] = u
	}
	if created != buyers || len(seen) != buyers {
		t.Fatalf("%d created, %d numbers; want %d of each", created, len(seen), buyers)
	}
	all := reservationsAfter(t, s, a.ID, 0)
	for i, r := range all {
		if r.Number != int64(i+1) || seen[r.Number] != r.UserID || r.Wave != 0 {
			t.Fatalf("reservation %d: %+v; want number %d of %s, no wave yet", i, r, i+1, seen[int64(i+1)])
		}
	}
	if len(all) != buyers {
		t.Fatalf("%d reservations listed, want %d", len(all), buyers)
	}
	// The close, while 20 more buyers reserve: each reservation committed before it is counted,
	// each after it refused, whatever the clock its node read.
	var late sync.WaitGroup
	var lateMu sync.Mutex
	lateNumbers := map[string]int64{}
	for i := range 20 {
		late.Go(func() {
			u := fmt.Sprintf("late%02d", i)
			r, _, err := s.Reserve(ctx, a.ID, u, t0)
			switch {
			case err == nil:
				lateMu.Lock()
				lateNumbers[u] = r.Number
				lateMu.Unlock()
			case !errors.Is(err, sale.ErrReservationsClosed):
				t.Errorf("reserve %s at the close: %v", u, err)
			}
		})
	}
	n, assigned, err := s.CloseReservations(ctx, a.ID)
	late.Wait()
	if err != nil || assigned || n != buyers+int64(len(lateNumbers)) {
		t.Fatalf("close: %d, %v, %v; want %d reserved (%d of them during the close), not assigned", n, assigned, err,
			buyers+len(lateNumbers), len(lateNumbers))
	}
	for u, num := range lateNumbers {
		if num > n {
			t.Errorf("%s got number %d after a close that counted %d", u, num, n)
		}
	}
	if _, _, err := s.Reserve(ctx, a.ID, "after", t0); !errors.Is(err, sale.ErrReservationsClosed) {
		t.Errorf("a reservation after the close: %v", err)
	}
	if r, isNew, err := s.Reserve(ctx, a.ID, "u07", t0); err != nil || isNew || r.Number != numbers["u07"][0] {
		t.Errorf("a reserver asking again after the close: %+v, %v, %v; want their reservation", r, isNew, err)
	}
	if _, _, err := s.CloseReservations(ctx, "nope"); !errors.Is(err, sale.ErrNotFound) {
		t.Errorf("closing no activity: %v", err)
	}
	all = append(all, reservationsAfter(t, s, a.ID, all[len(all)-1].Number)...) // the ones that came in time
	waves := sale.AssignWaves(got, all)
	if err := s.SetWaves(ctx, a.ID, waves); err != nil {
		t.Fatal(err)
	}
	if err := s.WavesAssigned(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if again, assigned, err := s.CloseReservations(ctx, a.ID); err != nil || !assigned || again != n {
		t.Fatalf("close again: %d, %v, %v; want %d, assigned", again, assigned, err, n)
	}
	perWave := map[int64]int{}
	for _, r := range all {
		back, err := s.Reservation(ctx, a.ID, r.UserID)
		if err != nil || back.Wave != waves[r.Number] || back.Number != r.Number || !back.ReservedAt.Equal(r.ReservedAt) {
			t.Fatalf("%s's reservation after the close: %+v, %v; want wave %d", r.UserID, back, err, waves[r.Number])
		}
		perWave[back.Wave]++
	}
	ws, err := s.WaveStats(ctx, a.ID)
	if err != nil || len(ws) != 3 {
		t.Fatalf("wave stats: %+v, %v; want 3 waves", ws, err)
	}
	for _, w := range ws {
		if w.Reserved != int64(perWave[w.Wave]) || w.Grabbed != 0 || w.Won != 0 {
			t.Errorf("wave %d's stats %+v; want %d reserved, nobody's order yet", w.Wave, w, perWave[w.Wave])
		}
	}
	size := (n + 2) / 3
	if int64(perWave[1]) != size || int64(perWave[2]) != size || int64(perWave[3]) != n-2*size {
		t.Errorf("waves %v; want %d, %d, %d of %d in 3", perWave, size, size, n-2*size, n)
	}
}

// reservationsAfter lists the reservations of activity id numbered after after, page by page.
func reservationsAfter(t *testing.T, s *Store, id string, after int64) []sale.Reservation {
	t.Helper()
	var all []sale.Reservation
	for {
		page, err := s.Reservations(context.Background(), id, after, 15)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			return all
		}
		all = append(all, page...)
		after = page[len(page)-1].Number
	}
}
