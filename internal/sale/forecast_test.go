package sale

import (
	"math"
	"testing"
	"time"
)

// TestHistoryOf: a sale's seconds from its start count; its peak is the busiest second, its peak
// factor the busiest second over a wave's mean (the clicks over the waves), and its spread the
// mean share of each second after an opening, each second in the wave opened last by then.
func TestHistoryOf(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	a := Activity{ID: "r", Admission: AdmitReservation, StartAt: start, EndAt: start.Add(time.Minute), Waves: 3, WaveInterval: 10 * time.Second}
	s := start.Unix()
	perSecond := map[int64]int64{
		s - 5: 1000,                     // before the start: not counted
		s:     60, s + 1: 30, s + 9: 10, // wave 1: 100, busiest 60
		s + 10: 20, s + 12: 20, // wave 2: 40, busiest 20
		s + 20: 5, s + 45: 5, // wave 3: 10, busiest 5
		s + 60: 1000, // from the end: not counted
	}
	at := start.Add(time.Hour)
	h := HistoryOf(a, 200, 150, perSecond, at)
	if h.ActivityID != "r" || !h.ArchivedAt.Equal(at) || h.Reserved != 200 || h.Buyers != 150 || h.Clicks != 150 || h.PeakRPS != 60 ||
		h.Waves != 3 || h.WaveInterval != 10*time.Second {
		t.Fatalf("history %+v", h)
	}
	if h.PeakFactor != 60.0*3/150 {
		t.Errorf("peak factor %g; want 60 of the 50 a wave clicked on average", h.PeakFactor)
	}
	// Second 0: 0.6, 0.5, 0.5; second 1: 0.3; second 2: 0.5 (wave 2); second 9: 0.1. Wave 3's
	// second 25 is past the spread's ten.
	want := []float64{(0.6 + 0.5 + 0.5) / 3, 0.3 / 3, 0.5 / 3, 0, 0, 0, 0, 0, 0, 0.1 / 3}
	for i, w := range want {
		if math.Abs(h.Spread[i]-w) > 1e-12 {
			t.Errorf("spread[%d] = %g; want %g (%v)", i, h.Spread[i], w, h.Spread)
		}
	}
	if empty := HistoryOf(a, 10, 0, nil, at); empty.Clicks != 0 || empty.PeakFactor != 0 || len(empty.Spread) != SpreadSeconds {
		t.Errorf("a sale nobody clicked: %+v", empty)
	}
}

// TestFitAndPredict: below MinHistory sales with a crowd the prior; from them, the pooled rates
// of the latest HistoryFitted; the prediction multiplies them out for the largest wave.
func TestFitAndPredict(t *testing.T) {
	sale := func(reserved, buyers, clicks int64, factor float64) SaleHistory {
		return SaleHistory{Reserved: reserved, Buyers: buyers, Clicks: clicks, PeakFactor: factor}
	}
	if m := Fit([]SaleHistory{sale(100, 80, 240, 0.5), sale(100, 90, 270, 0.5), sale(100, 0, 0, 0)}); m != Prior {
		t.Errorf("two sales with a crowd: %+v; want the prior", m)
	}
	m := Fit([]SaleHistory{sale(100, 80, 160, 0.4), sale(300, 240, 720, 0.6), sale(100, 80, 320, 0.5), sale(50, 0, 0, 0)})
	if m.Sales != 3 || m.BuyersPerReservation != 0.8 || m.ClicksPerBuyer != 3 || math.Abs(m.PeakFactor-0.5) > 1e-12 {
		t.Errorf("fitted %+v; want 3 sales, 0.8 buyers a reservation, 3 clicks a buyer, 0.5", m)
	}
	var many []SaleHistory
	for range HistoryFitted {
		many = append(many, sale(10, 10, 10, 1))
	}
	many = append(many, sale(10, 1, 1000, 0)) // older than the latest HistoryFitted
	if m := Fit(many); m.Sales != HistoryFitted || m.BuyersPerReservation != 1 || m.ClicksPerBuyer != 1 || m.PeakFactor != 1 {
		t.Errorf("fitted from %d: %+v; want the latest %d alone", len(many), m, HistoryFitted)
	}

	a := Activity{ID: "r", Admission: AdmitReservation, Waves: 4}
	f := m.Predict(a, 1000)
	// 1,000 reserved: 800 buyers, 2,400 clicks, 600 a wave of 4; half that in the busiest second.
	if f.Basis != BasisHistory || f.Reserved != 1000 || f.ExpectedBuyers != 800 || f.ExpectedClicks != 2400 || f.ExpectedPeakRPS != 300 {
		t.Errorf("forecast %+v", f)
	}
	if p := Prior.Predict(a, 0); p.Basis != BasisPrior || p.ExpectedPeakRPS != 0 || p.ExpectedClicks != 0 {
		t.Errorf("nobody reserved: %+v", p)
	}
}
