package sqlstore

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"sync"
	"testing"
	"time"

	"seckill/internal/sale"
)

// testForecast: nodes adding a sale's arrivals at once add up, second by second; only reservers
// are marked as having clicked, each once; the history is kept once, deletes the arrivals, and
// reads back newest first.
func testForecast(t *testing.T, dsn string) {
	ctx := context.Background()
	s := openStore(t, dsn)
	a := item("fc", 10, 1)
	a.Admission, a.ReserveFrom, a.Waves, a.WaveInterval, a.WaveOrder = sale.AdmitReservation, t0.Add(-time.Hour), 2, time.Minute, sale.WaveByNumber
	create(t, s, a)
	for i := range 5 {
		if _, _, err := s.Reserve(ctx, a.ID, fmt.Sprint("u", i), t0); err != nil {
			t.Fatal(err)
		}
	}
	// Four nodes, each with 700 seconds (more than a statement's chunk) and the users u0 to u3 and
	// a stranger, at once.
	sec := t0.Unix()
	var wg sync.WaitGroup
	for node := range 4 {
		wg.Go(func() {
			per := map[int64]int64{}
			for i := range int64(700) {
				per[sec+i] = i + 1
			}
			if err := s.AddArrivals(ctx, a.ID, per, []string{"u0", "u1", "u2", "u3", "stranger"}); err != nil {
				t.Errorf("node %d adds: %v", node, err)
			}
		})
	}
	wg.Wait()
	per, clicked, err := s.Arrivals(ctx, a.ID)
	if err != nil || clicked != 4 || len(per) != 700 {
		t.Fatalf("arrivals: %d seconds, %d clicked, %v; want 700 seconds and 4 reservers (not u4, not the stranger)", len(per), clicked, err)
	}
	for i := range int64(700) {
		if per[sec+i] != 4*(i+1) {
			t.Fatalf("second %d: %d; want %d, four nodes' %d", i, per[sec+i], 4*(i+1), i+1)
		}
	}
	if other, n, err := s.Arrivals(ctx, "nope"); err != nil || len(other) != 0 || n != 0 {
		t.Errorf("arrivals of no activity: %v, %d, %v", other, n, err)
	}

	h := sale.HistoryOf(a, 5, clicked, per, t0.Add(time.Hour))
	if err := s.KeepHistory(ctx, h); err != nil {
		t.Fatal(err)
	}
	again := h
	again.Buyers = 1
	if err := s.KeepHistory(ctx, again); err != nil {
		t.Fatal(err)
	}
	if left, _, err := s.Arrivals(ctx, a.ID); err != nil || len(left) != 0 {
		t.Errorf("arrivals after the history is kept: %d seconds, %v; want none", len(left), err)
	}
	b := item("fc2", 10, 1)
	b.Admission, b.ReserveFrom, b.Waves, b.WaveOrder = sale.AdmitReservation, t0.Add(-time.Hour), 1, sale.WaveByNumber
	create(t, s, b)
	later := sale.SaleHistory{ActivityID: b.ID, ArchivedAt: t0.Add(2 * time.Hour), Reserved: 1, Waves: 1, Spread: make([]float64, sale.SpreadSeconds)}
	if err := s.KeepHistory(ctx, later); err != nil {
		t.Fatal(err)
	}
	got, err := s.History(ctx, 10)
	if err != nil || len(got) != 2 {
		t.Fatalf("history: %+v, %v; want two sales", got, err)
	}
	for i, x := range got[1].Spread { // kept to four places
		if math.Abs(x-h.Spread[i]) > 5e-5 {
			t.Errorf("spread[%d] read back %g; want %g", i, x, h.Spread[i])
		}
		got[1].Spread[i] = h.Spread[i]
	}
	if !reflect.DeepEqual(got[0], later) || !reflect.DeepEqual(got[1], h) {
		t.Errorf("history %+v; want the later sale, then %+v (the first kept)", got, h)
	}
	if one, err := s.History(ctx, 1); err != nil || len(one) != 1 || one[0].ActivityID != b.ID {
		t.Errorf("the latest: %+v, %v", one, err)
	}
}
