package saletest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"seckill/internal/node"
	"seckill/internal/node/nodetest"
	"seckill/internal/sale"
	"seckill/internal/saletest"
)

// TestReservationsService: buyers reserve between the reservations' opening and the sale's
// start, once each (a second call answers the first, and so does one after the close); the
// close assigns the waves, in the order of reservation or drawn, and may run again to the same
// waves; an activity of another admission takes none.
func TestReservationsService(t *testing.T) {
	ctx := context.Background()
	clock := saletest.NewClock(saletest.T0)
	env := nodetest.Embedded(t, clock)
	rs := env.Reservations
	create := func(id string, order sale.WaveOrder, admission sale.Admission) sale.Activity {
		t.Helper()
		now := clock.Now()
		a := sale.Activity{ID: id, Name: "Phone", Kind: sale.KindItem, Stock: 10, PriceCents: 100, PerUserLimit: 1,
			StartAt: now.Add(time.Hour), EndAt: now.Add(2 * time.Hour), PayWindow: time.Minute, Admission: admission,
			StockShards: 1, CreatedAt: now, Revision: 1, ReserveFrom: now.Add(10 * time.Minute), Waves: 3,
			WaveInterval: 5 * time.Minute, WaveOrder: order}
		a.Seed[0] = 7
		// Not through CreateActivity: its admission is not one an operator may create yet.
		if err := env.Store.CreateActivity(ctx, a, nil); err != nil {
			t.Fatal(err)
		}
		return a
	}
	byNumber, drawn := create("res-n", sale.WaveByNumber, sale.AdmitReservation), create("res-d", sale.WaveDrawn, sale.AdmitReservation)
	direct := create("direct", "", sale.AdmitDirect)
	if _, _, err := rs.Reserve(ctx, byNumber.ID, "u00"); !errors.Is(err, sale.ErrReservationsNotOpen) {
		t.Errorf("before the reservations open: %v", err)
	}
	if _, _, err := rs.Reserve(ctx, direct.ID, "u00"); !errors.Is(err, sale.ErrNotReservable) {
		t.Errorf("an activity of direct admission: %v", err)
	}
	if _, _, err := rs.Reserve(ctx, "nope", "u00"); !errors.Is(err, sale.ErrNotFound) {
		t.Errorf("no such activity: %v", err)
	}
	if _, _, err := rs.Reserve(ctx, byNumber.ID, ""); !errors.Is(err, sale.ErrInvalid) {
		t.Errorf("no user: %v", err)
	}
	clock.Advance(15 * time.Minute)
	const buyers = 10
	for _, a := range []sale.Activity{byNumber, drawn} {
		for i := range buyers {
			u := fmt.Sprintf("u%02d", i)
			r, created, err := rs.Reserve(ctx, a.ID, u)
			if err != nil || !created || r.Number != int64(i+1) || r.Wave != 0 {
				t.Fatalf("%s reserves %s: %+v, %v, %v; want number %d, no wave yet", u, a.ID, r, created, err, i+1)
			}
			if again, created, err := rs.Reserve(ctx, a.ID, u); err != nil || created || again.Number != r.Number {
				t.Fatalf("%s reserves %s again: %+v, %v, %v; want the first", u, a.ID, again, created, err)
			}
		}
		if _, err := rs.Close(ctx, a, 4); !errors.Is(err, sale.ErrInvalidState) {
			t.Errorf("a close before the start: %v", err)
		}
	}
	if _, err := rs.Mine(ctx, byNumber.ID, "stranger"); !errors.Is(err, sale.ErrNoReservation) {
		t.Errorf("a stranger's reservation: %v", err)
	}
	clock.Advance(time.Hour)
	if _, _, err := rs.Reserve(ctx, byNumber.ID, "late"); !errors.Is(err, sale.ErrReservationsClosed) {
		t.Errorf("a reservation after the start: %v", err)
	}
	if r, created, err := rs.Reserve(ctx, byNumber.ID, "u03"); err != nil || created || r.Number != 4 {
		t.Errorf("a reserver asking after the start: %+v, %v, %v; want their reservation", r, created, err)
	}
	for _, a := range []sale.Activity{byNumber, drawn} {
		for range 2 { // a close that runs again assigns the same waves
			if n, err := rs.Close(ctx, a, 4); err != nil || n != buyers {
				t.Fatalf("close %s: %d, %v", a.ID, n, err)
			}
		}
	}
	waveOf := func(a sale.Activity, u string) int64 {
		r, err := rs.Mine(ctx, a.ID, u)
		if err != nil {
			t.Fatal(err)
		}
		return r.Wave
	}
	perWave := map[int64]int{}
	differ := false
	for i := range buyers {
		u := fmt.Sprintf("u%02d", i)
		if want := sale.WaveOf(int64(i), buyers, 3); waveOf(byNumber, u) != want {
			t.Errorf("%s in wave %d of %s; want %d, by number", u, waveOf(byNumber, u), byNumber.ID, want)
		}
		w := waveOf(drawn, u)
		perWave[w]++
		differ = differ || w != waveOf(byNumber, u)
	}
	if perWave[1] != 4 || perWave[2] != 4 || perWave[3] != 2 || !differ {
		t.Errorf("the drawn waves %v (4, 4, 2 of 10), differing from the order of reservation: %v", perWave, differ)
	}
}

// TestWaveReminders: RemindDue writes each wave's reminder once, in the before ahead of its
// opening and not earlier, in the order of the waves, saying the wave's reservers (its share of
// them before the close); a wave that opened unreminded gets none, and an activity of another
// admission none at all.
func TestWaveReminders(t *testing.T) {
	ctx := context.Background()
	clock := saletest.NewClock(saletest.T0)
	const sink = "http://127.0.0.1:9/hook"
	env, n := nodetest.Served(t, clock, func(c *node.Config) {
		c.Webhooks, c.WebhookSecret = []string{sink}, "the shop's webhook secret"
	})
	now := clock.Now()
	a := sale.Activity{ID: "remind", Name: "Phone", Kind: sale.KindItem, Stock: 10, PriceCents: 100, PerUserLimit: 1,
		StartAt: now.Add(time.Hour), EndAt: now.Add(2 * time.Hour), PayWindow: time.Minute, Admission: sale.AdmitReservation,
		StockShards: 1, CreatedAt: now, Revision: 1, ReserveFrom: now, Waves: 4, WaveInterval: 10 * time.Minute, WaveOrder: sale.WaveByNumber}
	direct := a
	direct.ID, direct.Admission, direct.ReserveFrom, direct.Waves, direct.WaveInterval, direct.WaveOrder = "direct", sale.AdmitDirect, time.Time{}, 0, 0, ""
	for _, x := range []sale.Activity{a, direct} {
		if err := env.Store.CreateActivity(ctx, x, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Service.ReloadActivities(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 7 {
		if _, _, err := env.Reservations.Reserve(ctx, a.ID, fmt.Sprint("u", i)); err != nil {
			t.Fatal(err)
		}
	}
	reminders := func() []sale.EventDelivery {
		t.Helper()
		ds, err := n.Store.Deliveries(ctx, sale.DeliveryFilter{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		slices.Reverse(ds) // oldest first
		return ds
	}
	remind := func(want int) {
		t.Helper()
		if got, err := env.Reservations.RemindDue(ctx, 5*time.Minute); err != nil || got != want {
			t.Fatalf("at %s: %d reminders written, %v; want %d", clock.Now().Sub(now), got, err, want)
		}
	}
	remind(0) // an hour ahead
	clock.Advance(54*time.Minute + 59*time.Second)
	remind(0)
	clock.Advance(time.Second) // wave 1 opens in 5 minutes
	remind(1)
	remind(0)
	// Wave 2 opens at 1h10m; its reminder is due from 1h05m. The clock jumps past wave 2's opening
	// (every node was down) into wave 3's window.
	clock.Advance(21 * time.Minute) // 1h16m: wave 3 opens at 1h20m
	remind(1)
	remind(0)
	clock.Advance(10 * time.Minute) // 1h26m: wave 4 at 1h30m
	remind(1)
	clock.Advance(time.Hour)
	remind(0)
	ds := reminders()
	var waves []int64
	for _, d := range ds {
		if d.Type != sale.EventWaveOpening || d.Wave == nil || d.Wave.ActivityID != a.ID || d.Order.ActivityID != a.ID {
			t.Fatalf("delivery %+v: want a reminder of %s", d, a.ID)
		}
		k := d.Wave.Wave
		waves = append(waves, k)
		// 7 reservers in 4 waves: 2, 2, 2, 1.
		if want := map[int64]int64{1: 2, 2: 2, 3: 2, 4: 1}[k]; d.Wave.Reserved != want || !d.Wave.OpensAt.Equal(a.WaveOpens(k)) ||
			d.Wave.ActivityName != "Phone" || d.ID != sale.WaveOpeningID(a.ID, k) {
			t.Errorf("wave %d's reminder %+v; want %d reserved, opening at %s", k, d.Wave, want, a.WaveOpens(k))
		}
		if d.At.Before(d.Wave.OpensAt.Add(-5*time.Minute)) || !d.At.Before(d.Wave.OpensAt) {
			t.Errorf("wave %d's reminder written at %s; want within the 5 minutes before %s", k, d.At, d.Wave.OpensAt)
		}
	}
	if !slices.Equal(waves, []int64{1, 3, 4}) {
		t.Errorf("reminders of waves %v; want 1, 3 and 4 (2 opened while nobody reminded)", waves)
	}
}

// BenchmarkForecastsRecord is what counting a reservation sale's grab for its forecast costs the
// grab's handler: every request of the crowd takes the feature's lock for a map update, on every
// core at once.
func BenchmarkForecastsRecord(b *testing.B) {
	ctx := context.Background()
	clock := saletest.NewClock(saletest.T0)
	env := nodetest.Embedded(b, clock)
	now := clock.Now()
	a := sale.Activity{ID: "bench", Name: "Phone", Kind: sale.KindItem, Stock: 10, PriceCents: 100, PerUserLimit: 1,
		StartAt: now, EndAt: now.Add(time.Hour), PayWindow: time.Minute, Admission: sale.AdmitReservation,
		StockShards: 1, CreatedAt: now, Revision: 1, ReserveFrom: now.Add(-time.Hour), Waves: 1, WaveOrder: sale.WaveByNumber}
	if err := env.Store.CreateActivity(ctx, a, nil); err != nil {
		b.Fatal(err)
	}
	if err := env.Service.ReloadActivities(ctx); err != nil {
		b.Fatal(err)
	}
	users := make([]string, 4096)
	for i := range users {
		users[i] = fmt.Sprint("u", i)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			env.Forecasts.Record(a, users[i%len(users)], now.Add(time.Duration(i%10)*time.Second))
			i++
		}
	})
}
