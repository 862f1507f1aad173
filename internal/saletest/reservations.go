package saletest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"seckill/internal/sale"
)

// ReservationTests checks a reservation sale through the service, on a wiring as a node builds
// it: a crowd reserves, the waves open, a crowd of reservers and strangers grabs in every wave,
// and none but a reserver in their open wave takes a unit. lose, when set, makes the gate lose
// everything it holds (a Redis restarted without its data) between two waves: the waves are
// given to the gate again, and until then no grab is taken.
func ReservationTests(t *testing.T, newEnv NewEnv, lose func(t *testing.T)) {
	ctx := context.Background()
	env := newEnv(t, NewClock(T0))
	now := env.Clock.Now()
	const stock, reservers, strangers, waves = 60, 90, 40, int64(3)
	a, err := env.Service.CreateActivity(ctx, sale.Activity{Name: "Launch", Kind: sale.KindItem, Stock: stock,
		PriceCents: 100, StartAt: now.Add(time.Hour), EndAt: now.Add(2 * time.Hour), PayWindow: time.Hour,
		Admission: sale.AdmitReservation, Waves: waves, WaveInterval: 10 * time.Minute, StockShards: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !a.ReserveFrom.Equal(now) || a.WaveOrder != sale.WaveByNumber || a.Seed == (sale.Seed{}) {
		t.Fatalf("created %+v: want reservations open from now, in the order of reservation, with a seed", a)
	}
	// The crowd reserves, every buyer twice at once.
	var wg sync.WaitGroup
	for i := range reservers {
		for range 2 {
			wg.Go(func() {
				if _, _, err := env.Reservations.Reserve(ctx, a.ID, fmt.Sprintf("r%03d", i)); err != nil {
					t.Errorf("reserve: %v", err)
				}
			})
		}
	}
	wg.Wait()
	wave := map[string]int64{}
	for i := range reservers {
		u := fmt.Sprintf("r%03d", i)
		r, err := env.Reservations.Mine(ctx, a.ID, u)
		if err != nil || r.Wave != 0 {
			t.Fatalf("%s's reservation before the close: %+v, %v", u, r, err)
		}
		wave[u] = sale.WaveOf(r.Number-1, reservers, waves)
	}

	env.Clock.Advance(time.Hour) // the start
	crowd := func(label string) (won map[string]string) {
		t.Helper()
		won = map[string]string{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		at := env.Clock.Now()
		grab := func(u string) {
			g, err := env.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: u, IdempotencyKey: "k-" + u})
			mu.Lock()
			defer mu.Unlock()
			var wn sale.WaveNotOpen
			reserved, open := wave[u] > 0, wave[u] > 0 && !at.Before(a.WaveOpens(wave[u]))
			switch {
			case err == nil && open:
				won[u] = g.Token
			case err == nil:
				t.Errorf("%s: %s took a unit (reserved %v, wave %d)", label, u, reserved, wave[u])
			case errors.Is(err, sale.ErrNotReserved) && !reserved:
			case errors.As(err, &wn) && reserved && !open && wn.Wave == wave[u] && wn.OpensAt.Equal(a.WaveOpens(wave[u])):
			case (errors.Is(err, sale.ErrSoldOut) || errors.Is(err, sale.ErrAlreadyBought)) && open:
			default:
				t.Errorf("%s: %s (reserved %v, wave %d, open %v): %v", label, u, reserved, wave[u], open, err)
			}
		}
		for i := range reservers {
			wg.Go(func() { grab(fmt.Sprintf("r%03d", i)) })
		}
		for i := range strangers {
			wg.Go(func() { grab(fmt.Sprintf("s%03d", i)) })
		}
		wg.Wait()
		return won
	}
	// Before the gate holds the waves: everyone waits, nothing is taken.
	if _, err := env.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: "r000"}); !isAssigning(err) {
		t.Fatalf("a grab before the waves are given to the gate: %v; want a WaveNotOpen of no wave", err)
	}
	open := func() {
		t.Helper()
		if n, err := env.Reservations.OpenDue(ctx); err != nil || n != reservers {
			t.Fatalf("OpenDue: %d, %v; want the %d reservers given to the gate", n, err, reservers)
		}
		if n, err := env.Reservations.OpenDue(ctx); err != nil || n != 0 {
			t.Fatalf("OpenDue again: %d, %v; want nothing to do", n, err)
		}
	}
	open()
	for u, w := range wave {
		if r, err := env.Reservations.Mine(ctx, a.ID, u); err != nil || r.Wave != w {
			t.Fatalf("%s's reservation after the close: %+v, %v; want wave %d", u, r, err, w)
		}
	}
	won := map[string]string{}
	for k := int64(1); k <= waves; k++ {
		if k > 1 {
			env.Clock.Advance(10 * time.Minute)
		}
		if k == 2 && lose != nil {
			env.Drain(a.ID) // what Redis loses must be the database's already
			lose(t)
			if _, err := env.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: "r000"}); !isAssigning(err) {
				t.Fatalf("a grab after the gate lost the waves: %v; want a WaveNotOpen of no wave", err)
			}
			open()
		}
		for u, tok := range crowd(fmt.Sprintf("wave %d", k)) {
			if first, again := won[u]; again && first != tok {
				t.Errorf("%s won twice: %s and %s", u, first, tok)
			}
			won[u] = tok
		}
	}
	env.Drain(a.ID)
	if len(won) != stock {
		t.Fatalf("%d units won of %d by %d reservers", len(won), stock, reservers)
	}
	for u, tok := range won {
		o, err := env.Store.Order(ctx, tok)
		if err != nil || o.UserID != u {
			t.Fatalf("%s's order %s: %+v, %v", u, tok, o, err)
		}
	}
	if n, err := env.Service.Remaining(ctx, a.ID); err != nil || n != 0 {
		t.Fatalf("remaining %d, %v; want 0", n, err)
	}
}

// isAssigning reports whether err is the gate's answer while it has not the whole set of
// reservers: a WaveNotOpen of no wave.
func isAssigning(err error) bool {
	var wn sale.WaveNotOpen
	return errors.As(err, &wn) && wn.Wave == 0
}
