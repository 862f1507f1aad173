package sale_test

import (
	"strings"
	"testing"
	"time"

	"seckill/internal/sale"
	"seckill/internal/saletest"
)

// TestGrabTokensSortAsTheyAreMade: a grab token made later sorts later (by its millisecond),
// whatever its random part; tokens of one millisecond differ.
func TestGrabTokensSortAsTheyAreMade(t *testing.T) {
	t0 := saletest.T0
	prev := sale.NewGrabToken(t0)
	seen := map[string]bool{prev: true}
	for i := 1; i < 2000; i++ {
		at := t0.Add(time.Duration(i) * time.Millisecond)
		tok := sale.NewGrabToken(at)
		if tok <= prev || len(tok) != 25 || tok[0] != 'g' {
			t.Fatalf("token %q made at %v after %q", tok, at, prev)
		}
		same := sale.NewGrabToken(at)
		if seen[same] || same == tok {
			t.Fatalf("two tokens of one millisecond are equal: %q", same)
		}
		seen[tok], seen[same], prev = true, true, max(tok, same)
	}
}

// TestGrabTokenTime: a grab token says when it was made, to the millisecond; what is not one is
// not read as one. (NewToken("g") is indistinguishable, and reads as a random time.)
func TestGrabTokenTime(t *testing.T) {
	at := time.Date(2001, 11, 30, 12, 0, 0, 123_456_789, time.UTC)
	got, ok := sale.GrabTokenTime(sale.NewGrabToken(at))
	if !ok || !got.Equal(at.Truncate(time.Millisecond)) {
		t.Fatalf("GrabTokenTime = %v, %v; want %v", got, ok, at.Truncate(time.Millisecond))
	}
	tok := sale.NewGrabToken(at)
	for _, bad := range []string{"", "g", "g123", sale.NewToken("p"), "x" + tok[1:], tok + "a", "g" + strings.Repeat("!", len(tok)-1)} {
		if _, ok := sale.GrabTokenTime(bad); ok {
			t.Errorf("GrabTokenTime(%q) read a time", bad)
		}
	}
}
