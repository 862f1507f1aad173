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

// testWaveReminders: a wave's reminder is written to the outbox once, however many nodes write
// it at once or again later (after its event is purged too); an earlier wave's reminder is not
// written once a later one's is; the event reads back as an activity's, behind the activity's
// earlier reminder for each sink and beside the orders' events.
func testWaveReminders(t *testing.T, dsn string) {
	ctx := context.Background()
	s := openStore(t, dsn)
	s.EmitTo("hook", "kafka:t")
	a := item("rem", 10, 1)
	a.Admission, a.ReserveFrom, a.Waves, a.WaveInterval, a.WaveOrder = sale.AdmitReservation, t0.Add(-time.Hour), 3, time.Minute, sale.WaveByNumber
	create(t, s, a)
	reminder := func(k int64) sale.Event {
		return sale.Event{ID: sale.WaveOpeningID(a.ID, k), Type: sale.EventWaveOpening, At: t0, Order: sale.Order{ActivityID: a.ID},
			Wave: &sale.WaveOpening{ActivityID: a.ID, ActivityName: "名 " + a.ID, Wave: k, OpensAt: a.WaveOpens(k), Reserved: 7}}
	}
	// Five nodes write wave 1's reminder at once: one writes it.
	var wg sync.WaitGroup
	var mu sync.Mutex
	sent := 0
	for range 5 {
		wg.Go(func() {
			ok, err := s.RemindWave(ctx, reminder(1))
			if err != nil {
				t.Errorf("remind of wave 1: %v", err)
			}
			if ok {
				mu.Lock()
				sent++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if sent != 1 {
		t.Fatalf("wave 1's reminder written %d times; want once", sent)
	}
	place(t, s, grab(a.ID, "u1", 0)) // an order's event between the two reminders
	if ok, err := s.RemindWave(ctx, reminder(3)); err != nil || !ok {
		t.Fatalf("wave 3's reminder: %v, %v", ok, err)
	}
	if ok, err := s.RemindWave(ctx, reminder(2)); err != nil || ok {
		t.Errorf("wave 2's reminder after wave 3's: written %v, %v; want not written", ok, err)
	}
	if _, err := s.RemindWave(ctx, sale.Event{ID: "x", Type: sale.EventWaveOpening, Wave: &sale.WaveOpening{ActivityID: "nope", Wave: 1}}); !errors.Is(err, sale.ErrNotFound) {
		t.Errorf("a reminder of no activity: %v; want ErrNotFound", err)
	}
	for _, sink := range []string{"hook", "kafka:t"} {
		ds, err := s.Deliverable(ctx, sink, t0.Add(time.Hour), 10)
		if err != nil || len(ds) != 2 {
			t.Fatalf("%s's deliverable: %+v, %v; want wave 1's reminder and the order's event", sink, ds, err)
		}
		d := ds[0]
		if d.Wave == nil || d.ID != sale.WaveOpeningID(a.ID, 1) || d.Type != sale.EventWaveOpening || d.Order.Token != "" ||
			d.Order.ActivityID != a.ID || *d.Wave != *reminder(1).Wave || !d.At.Equal(t0) {
			t.Errorf("%s's first: %+v (wave %+v); want wave 1's reminder", sink, d, d.Wave)
		}
		if ds[1].Wave != nil || ds[1].Type != sale.EventCreated {
			t.Errorf("%s's second: %+v; want the order's event", sink, ds[1])
		}
		// Wave 3's waits for wave 1's, as an order's events wait for the one before.
		if err := s.Delivered(ctx, sink, d.ID, t0); err != nil {
			t.Fatal(err)
		}
		ds, err = s.Deliverable(ctx, sink, t0.Add(time.Hour), 10)
		if err != nil || len(ds) != 2 || ds[1].ID != sale.WaveOpeningID(a.ID, 3) || ds[1].Wave.Wave != 3 {
			t.Fatalf("%s's deliverable after wave 1's: %+v, %v; want the order's event and wave 3's reminder", sink, ds, err)
		}
		for _, d := range ds {
			if err := s.Delivered(ctx, sink, d.ID, t0); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Purged, wave 3's reminder is not written again.
	if n, _, err := s.PurgeDelivered(ctx, t0.Add(time.Hour), 0, 100); err != nil || n != 3 {
		t.Fatalf("purge: %d, %v; want the 3 events", n, err)
	}
	if ok, err := s.RemindWave(ctx, reminder(3)); err != nil || ok {
		t.Errorf("wave 3's reminder after its purge: written %v, %v; want not written", ok, err)
	}
}
