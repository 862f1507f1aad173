package bench

import (
	"strings"
	"testing"
	"time"

	"seckill/internal/httpapi/wire"
)

// reservationRun is a correct reservation run's facts: six reservers in three waves a minute
// apart (two a wave), each winning a second into their wave, and a stranger refused.
func reservationRun() ([]Record, Waves, map[string]int64, map[string]wire.ReservationResponse) {
	w := Waves{Start: time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC), Count: 3, Interval: time.Minute}
	reserved := map[string]int64{}
	seen := map[string]wire.ReservationResponse{}
	var h []Record
	for n := int64(1); n <= 6; n++ {
		u := "r" + string(rune('0'+n))
		reserved[u] = n
		k := (n-1)/2 + 1
		opens := w.opens(k)
		seen[u] = wire.ReservationResponse{UserID: u, Number: n, Wave: &k, OpensAt: &opens}
		at := opens.Add(time.Second).UnixMicro()
		h = append(h, Record{User: u, Outcome: Won, Status: 202, Token: "t" + u, Start: at - 1000, End: at})
	}
	h = append(h, Record{User: "stranger", Outcome: NotReserved, Status: 403, Code: wire.CodeNotReserved})
	return h, w, reserved, seen
}

// TestReservationCheckCatchesEachViolation: a correct run passes; each violation of the
// admission, injected alone, is reported under its name.
func TestReservationCheckCatchesEachViolation(t *testing.T) {
	h, w, reserved, seen := reservationRun()
	var ok ReservationReport
	ok.check(h, w, reserved, seen)
	if !ok.OK() || ok.Strangers != 1 || ok.Waves[2].Won != 2 || ok.OpenS != 1 {
		t.Fatalf("a correct run: %+v", ok)
	}
	for _, tc := range []struct {
		name   string
		inject func(h []Record, seen map[string]wire.ReservationResponse) []Record
		count  func(r ReservationReport) int64
		says   string
	}{
		{"a stranger's win", func(h []Record, _ map[string]wire.ReservationResponse) []Record {
			return append(h, Record{User: "stranger", Outcome: Won, Status: 202, Token: "ts"})
		}, func(r ReservationReport) int64 { return r.Stranger }, "stranger, who did not reserve, took ts"},
		{"a win before its wave", func(h []Record, _ map[string]wire.ReservationResponse) []Record {
			h[5].End = w.opens(3).Add(-time.Millisecond).UnixMicro()
			return h
		}, func(r ReservationReport) int64 { return r.Early }, "before the wave opened"},
		{"a reserver refused", func(h []Record, _ map[string]wire.ReservationResponse) []Record {
			return append(h, Record{User: "r3", Outcome: NotReserved, Status: 403, Code: wire.CodeNotReserved})
		}, func(r ReservationReport) int64 { return r.Refused }, "r3, reservation 3, was refused"},
		{"a reservation in another wave", func(h []Record, seen map[string]wire.ReservationResponse) []Record {
			v := seen["r2"]
			k := int64(2)
			v.Wave = &k
			seen["r2"] = v
			return h
		}, func(r ReservationReport) int64 { return r.WavesOff }, "r2's reservation reads number 2, wave 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, w, reserved, seen := reservationRun()
			var r ReservationReport
			r.check(tc.inject(h, seen), w, reserved, seen)
			if r.OK() || tc.count(r) != 1 || !strings.Contains(strings.Join(r.Problems, "\n"), tc.says) {
				t.Fatalf("%+v; want one violation saying %q", r, tc.says)
			}
		})
	}
}

// TestShows: --show lets that share of the reservers come, drawn from the seed: the same ones
// for the same seed, others for another; 0 and 1 let all come.
func TestShows(t *testing.T) {
	s := Sale{Crowd: Crowd{Seed: 7}, Reservation: ReservationSpec{Show: 0.8}}
	came := 0
	for i := range 10_000 {
		if s.shows(i) {
			came++
		}
	}
	if came < 7_700 || came > 8_300 {
		t.Errorf("%d of 10,000 came; want about 8,000", came)
	}
	other := s
	other.Seed = 8
	same, differ := true, false
	for i := range 100 {
		same = same && s.shows(i) == s.shows(i)
		differ = differ || s.shows(i) != other.shows(i)
	}
	if !same || !differ {
		t.Errorf("the same seed draws the same reservers: %v; another seed others: %v", same, differ)
	}
	for _, all := range []float64{0, 1} {
		s.Reservation.Show = all
		for i := range 100 {
			if !s.shows(i) {
				t.Fatalf("--show %g: reserver %d stays away", all, i)
			}
		}
	}
}
