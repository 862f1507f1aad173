package bench

import (
	"fmt"
	"strings"
	"testing"

	"seckill/internal/httpapi/wire"
	"seckill/internal/sale"
)

// TestCheckLineCatchesEachViolation injects one fault at a time into a correct line (three early
// tickets placed by the revealed draw, two late ones after them, three units): the line's
// checker must report it under its name, and only it.
func TestCheckLineCatchesEachViolation(t *testing.T) {
	var seed sale.Seed
	copy(seed[:], "the nemesis's line, drawn fairly")
	correct := func() (map[string]string, map[string]wire.TicketResponse, wire.ActivityResponse, []string) {
		tickets, views := map[string]string{}, map[string]wire.TicketResponse{}
		entries := []string{"q-e0", "q-e1", "q-e2"}
		place := func(tok string, p int64, early bool) {
			status := sale.OutcomeSoldOut
			if p <= 3 {
				status = sale.OutcomeWon
			}
			tickets["u-"+tok] = tok
			views[tok] = wire.TicketResponse{Status: string(status), QueueToken: tok, Place: &p, Early: early}
		}
		for i, tok := range sale.DrawOrder(seed, entries) {
			place(tok, int64(i)+1, true)
		}
		place("q-l0", 4, false)
		place("q-l1", 5, false)
		pub := wire.ActivityResponse{Line: &wire.LineResponse{QueueCap: 10, Early: 3, DrawCommitment: seed.Commitment(), DrawSeed: seed.String()}}
		return tickets, views, pub, entries
	}
	at := func(views map[string]wire.TicketResponse, place int64) string {
		for tok, v := range views {
			if *v.Place == place {
				return tok
			}
		}
		t.Fatalf("no ticket at place %d", place)
		return ""
	}
	counters := func(r LineReport) map[string]int64 {
		return map[string]int64{"commitment": r.Commitments, "draw": r.DrawOff, "lost": r.Lost, "unanswered": r.Unanswered,
			"order": r.OutOfOrder, "winners": r.WinnersOff, "cap": r.OverCap}
	}
	tickets, views, pub, entries := correct()
	var rep LineReport
	checkLine(&rep, 3, tickets, views, pub, entries, nil)
	if !rep.OK() || rep.Winners != 3 || rep.Early != 3 {
		t.Fatalf("a correct line: %+v", rep)
	}
	// A correct line where the third winner is a ticket bench never saw (its join's answers were
	// lost): the ticket bench knows of that user came later and was answered already bought.
	tickets, views, pub, entries = correct()
	third := at(views, 3)
	v := views[third]
	v.Status = string(sale.OutcomeAlreadyBought)
	views[third] = v
	rep = LineReport{}
	checkLine(&rep, 3, tickets, views, pub, entries, map[string]bool{"u-" + third: true})
	if !rep.OK() || rep.Winners != 2 || rep.Unseen != 1 {
		t.Fatalf("a winner unseen: %+v", rep)
	}
	tests := []struct {
		kind   string
		inject func(views map[string]wire.TicketResponse, pub *wire.ActivityResponse)
		phrase string
	}{
		{"commitment", func(_ map[string]wire.TicketResponse, pub *wire.ActivityResponse) {
			var other sale.Seed // the commitment published at the creation was another seed's
			pub.Line.DrawCommitment = other.Commitment()
		}, "does not hash to the commitment"},
		{"draw", func(views map[string]wire.TicketResponse, _ *wire.ActivityResponse) {
			a, b := at(views, 1), at(views, 2)
			va, vb := views[a], views[b]
			va.Place, vb.Place = vb.Place, va.Place
			views[a], views[b] = va, vb
		}, "the revealed draw puts it at"},
		{"lost", func(views map[string]wire.TicketResponse, _ *wire.ActivityResponse) {
			views[at(views, 5)] = wire.TicketResponse{}
		}, "unknown to the server"},
		{"unanswered", func(views map[string]wire.TicketResponse, _ *wire.ActivityResponse) {
			tok := at(views, 5)
			v := views[tok]
			v.Status = string(sale.OutcomeWaiting)
			views[tok] = v
		}, "still waits"},
		{"order", func(views map[string]wire.TicketResponse, _ *wire.ActivityResponse) {
			third, fourth := at(views, 3), at(views, 4)
			v3, v4 := views[third], views[fourth]
			v3.Status, v4.Status = string(sale.OutcomeSoldOut), string(sale.OutcomeWon)
			views[third], views[fourth] = v3, v4
		}, "won behind"},
		{"winners", func(views map[string]wire.TicketResponse, _ *wire.ActivityResponse) {
			tok := at(views, 3)
			v := views[tok]
			v.Status = string(sale.OutcomeSoldOut)
			views[tok] = v
		}, "2 tickets won (0 more unseen); the stock of 3"},
		{"winners", func(views map[string]wire.TicketResponse, _ *wire.ActivityResponse) {
			tok := at(views, 1) // already bought, said to a user who holds nothing
			v := views[tok]
			v.Status = string(sale.OutcomeAlreadyBought)
			views[tok] = v
		}, "holds no order of the activity"},
		{"cap", func(_ map[string]wire.TicketResponse, pub *wire.ActivityResponse) {
			pub.Line.Early = 12
		}, "over the cap of 10"},
	}
	for _, tc := range tests {
		t.Run(tc.kind, func(t *testing.T) {
			tickets, views, pub, entries := correct()
			tc.inject(views, &pub)
			var rep LineReport
			checkLine(&rep, 3, tickets, views, pub, entries, map[string]bool{})
			for kind, n := range counters(rep) {
				if kind == tc.kind && n == 0 || kind != tc.kind && n != 0 {
					t.Errorf("%s counted %d: %+v", kind, n, rep)
				}
			}
			if rep.OK() || !strings.Contains(fmt.Sprint(rep.Problems), tc.phrase) {
				t.Errorf("problems %q, want one saying %q", rep.Problems, tc.phrase)
			}
		})
	}
}
