package sale_test

import (
	"seckill/internal/saletest"
	"testing"
	"time"

	"seckill/internal/sale"
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
