package sale_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"seckill/internal/sale"
)

// TestWaveOf: the first ⌈n/waves⌉ reservers in wave 1, and so on; the last waves may be smaller.
func TestWaveOf(t *testing.T) {
	for _, tc := range []struct {
		n, waves int64
		sizes    []int
	}{
		{40, 3, []int{14, 14, 12}}, {5, 4, []int{2, 2, 1}}, {6, 3, []int{2, 2, 2}}, {7, 1, []int{7}}, {1, 100, []int{1}},
	} {
		sizes := map[int64]int{}
		for i := range tc.n {
			sizes[sale.WaveOf(i, tc.n, tc.waves)]++
		}
		for k, want := range tc.sizes {
			if sizes[int64(k+1)] != want {
				t.Errorf("%d reservers in %d waves: %v; want %v", tc.n, tc.waves, sizes, tc.sizes)
				break
			}
		}
		if len(sizes) != len(tc.sizes) {
			t.Errorf("%d reservers in %d waves: %v; want %v", tc.n, tc.waves, sizes, tc.sizes)
		}
	}
}

func reservations(n int) []sale.Reservation {
	rs := make([]sale.Reservation, n)
	for i := range rs {
		rs[i] = sale.Reservation{ActivityID: "a", UserID: fmt.Sprintf("user-%03d", i), Number: int64(i + 1)}
	}
	// The store's pages come in any order to AssignWaves: reversed here.
	slices.Reverse(rs)
	return rs
}

// TestAssignWaves: in the order of reservation the first reservers enter first; drawn, the
// order is the draw's over the user ids with the activity's seed (recomputable by anyone from
// the revealed seed and the list), and another seed draws another order.
func TestAssignWaves(t *testing.T) {
	a := sale.Activity{StartAt: time.Unix(1_700_000_000, 0), Waves: 4, WaveInterval: 10 * time.Minute}
	if got := a.WaveOpens(3); !got.Equal(a.StartAt.Add(20 * time.Minute)) {
		t.Errorf("wave 3 opens at %s; want 20 min after the start", got)
	}
	rs := reservations(100)
	byNumber := sale.AssignWaves(a, rs)
	for n := int64(1); n <= 100; n++ {
		if want := (n-1)/25 + 1; byNumber[n] != want {
			t.Fatalf("in the order of reservation number %d is in wave %d; want %d", n, byNumber[n], want)
		}
	}
	a.WaveOrder = sale.WaveDrawn
	a.Seed[0] = 1
	drawn := sale.AssignWaves(a, rs)
	users := make([]string, len(rs))
	number := map[string]int64{}
	for i, r := range rs {
		users[i], number[r.UserID] = r.UserID, r.Number
	}
	for i, u := range sale.DrawOrder(a.Seed, users) {
		if want := int64(i)/25 + 1; drawn[number[u]] != want {
			t.Fatalf("drawn: %s (number %d) in wave %d; the draw's place %d says %d", u, number[u], drawn[number[u]], i, want)
		}
	}
	if fmt.Sprint(drawn) == fmt.Sprint(byNumber) {
		t.Error("the draw kept the order of reservation")
	}
	a.Seed[0] = 2
	if other := sale.AssignWaves(a, rs); fmt.Sprint(other) == fmt.Sprint(drawn) {
		t.Error("another seed drew the same waves")
	}
}
