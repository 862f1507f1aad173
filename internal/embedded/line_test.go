package embedded_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"seckill/internal/embedded"
	"seckill/internal/sale"
	"seckill/internal/saletest"
)

// nullLines is a line journal that keeps nothing: for tests of the line's logic alone.
type nullLines struct{}

func (nullLines) AppendTickets(context.Context, []sale.TicketRow) error { return nil }
func (nullLines) SealLine(context.Context, string) error                { return nil }
func (nullLines) AdmitTickets(context.Context, string, int64, int64, []sale.TicketRow) error {
	return nil
}
func (nullLines) LoadLines(context.Context) ([]sale.LineRecord, error) { return nil, nil }
func (nullLines) DropLine(context.Context, string) error               { return nil }

// TestEarlyCrowdPlacesAreUniform: over 5,000 lines with fixed seeds, each with the same early
// crowd of five, every member lands at every place about equally often (chi-square over the 25
// cells, 16 degrees of freedom; 39.25 is its 0.1 % critical value), so arriving first in the
// early crowd is worth nothing, and neither is any token. Seeds and tokens are fixed: the test
// is deterministic, not flaky.
func TestEarlyCrowdPlacesAreUniform(t *testing.T) {
	const lines, crowd = 5000, 5
	var counts [crowd][crowd]int
	for i := range lines {
		a := saletest.LineItem(fmt.Sprint("u", i), 1, sale.AdmitQueue)
		binary.LittleEndian.PutUint64(a.Seed[:], uint64(i)*0x9e3779b97f4a7c15)
		l, err := embedded.OpenLine(context.Background(), nullLines{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		place := map[string]int{}
		for j := range crowd {
			tk, err := l.Join(context.Background(), sale.JoinRequest{Activity: a, UserID: fmt.Sprint("user", j),
				Token: fmt.Sprintf("q%024d.%s", j, a.ID), Now: a.StartAt.Add(-time.Minute)})
			if err != nil {
				t.Fatal(err)
			}
			place[tk.Token] = j
		}
		if _, err := l.Seal(context.Background(), a); err != nil {
			t.Fatal(err)
		}
		for tok, j := range place {
			tk, _, err := l.Ticket(context.Background(), tok)
			if err != nil {
				t.Fatal(err)
			}
			counts[j][tk.Place]++
		}
		l.Close()
	}
	want := float64(lines) / crowd
	chi := 0.0
	for j := range crowd {
		for p := range crowd {
			d := float64(counts[j][p]) - want
			chi += d * d / want
		}
	}
	if chi > 39.25 {
		t.Fatalf("places by arrival %v: chi-square %.1f over 39.25", counts, chi)
	}
	t.Logf("places by arrival %v: chi-square %.1f", counts, chi)
}
