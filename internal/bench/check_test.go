package bench

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"seckill/internal/httpapi/wire"
	"seckill/internal/sale"

	"github.com/google/go-cmp/cmp"
)

// finishedSale is a correct finished sale: users u0..u(n-1) click twice each; the first `stock` users
// win once (a second click is 409), the rest are sold out. Red packets split 100 cents per share
// plus one cent on the last.
func finishedSale(n, stock int, kind string) ([]Record, Facts) {
	var h []Record
	f := Facts{Stock: int64(stock), PerUserLimit: 1, Kind: kind, Orders: map[string]Order{}}
	for i := range n {
		u := fmt.Sprint("u", i)
		if i < stock {
			tok, amount := fmt.Sprint("t", i), int64(100)
			if i == stock-1 {
				amount++
			}
			h = append(h, Record{User: u, Outcome: Won, Status: 202, Token: tok, Amount: amount})
			h = append(h, Record{User: u, Outcome: AlreadyBought, Status: 409})
			f.Orders[tok] = Order{Found: true, Status: "CREATED", AmountCents: amount}
			f.TotalCents += amount
		} else {
			h = append(h, Record{User: u, Outcome: SoldOut, Status: 410}, Record{User: u, Outcome: SoldOut, Status: 410})
		}
	}
	f.Stats = wire.StatsResponse{Stock: int64(stock), Grabbed: int64(stock), Orders: int64(stock), Created: int64(stock)}
	if kind == "redpacket" { // the leaderboard: the last share (one cent more) first
		f.Board = []int64{101}
		for range stock - 1 {
			f.Board = append(f.Board, 100)
		}
	}
	return h, f
}

func TestCheckPassesACorrectSale(t *testing.T) {
	for _, kind := range []string{"item", "redpacket"} {
		h, f := finishedSale(50, 10, kind)
		v := Check(h, f)
		want := Verdict{Requests: 100, Wins: 10, Stock: 10, Demand: 50}
		if diff := cmp.Diff(want, v); diff != "" {
			t.Fatalf("%s: verdict (-want +got):\n%s", kind, diff)
		}
		if !v.OK() {
			t.Fatalf("%s: a correct sale fails: %v", kind, v.Problems)
		}
	}
}

// TestCheckLetsABuyerWhoCancelledBuyAgain: in a run whose buyers cancel, a unit cancelled goes
// back and its buyer may win one again, within the limit.
func TestCheckLetsABuyerWhoCancelledBuyAgain(t *testing.T) {
	h, f := finishedSale(50, 10, "item")
	f.Cancelled = map[string]bool{"t0": true}
	f.Orders["t0"] = Order{Found: true, Status: "CANCELLED"}
	h[1] = Record{User: "u0", Outcome: Won, Status: 202, Token: "again"} // u0's second click, after the cancel
	f.Orders["again"] = Order{Found: true, Status: "CREATED"}
	f.Stats.Cancelled = 1
	if v := Check(h, f); !v.OK() || v.Wins != 11 || v.Restocked != 1 {
		t.Fatalf("a buyer who cancelled and won again: %+v", v)
	}
}

// TestCheckLetsABuyerWhoseUnitWentBackBuyAgain: in a run whose windows close within it (the
// nemesis with payments), an order that expired, or whose late payment was owed back, gave its
// unit back too: its buyer may win again. The events of an order its owner cancelled are its
// creation and its cancel, of one that expired its creation and its expiry.
func TestCheckLetsABuyerWhoseUnitWentBackBuyAgain(t *testing.T) {
	for _, status := range []sale.Status{sale.StatusCancelled, sale.StatusRefundPending, sale.StatusRefunded} {
		h, f := finishedSale(50, 10, "item")
		f.Cancelled = map[string]bool{} // buyers may cancel: nobody did
		f.Orders["t0"] = Order{Found: true, Status: status}
		h[1] = Record{User: "u0", Outcome: Won, Status: 202, Token: "again"}
		f.Orders["again"] = Order{Found: true, Status: "CREATED"}
		f.Stats.Cancelled, f.Stats.RefundPending, f.Stats.Refunded = int64(btoi(status == sale.StatusCancelled)),
			int64(btoi(status == sale.StatusRefundPending)), int64(btoi(status == sale.StatusRefunded))
		if v := Check(h, f); !v.OK() || v.Wins != 11 || v.Restocked != 1 {
			t.Fatalf("a buyer whose order ended %s and who won again: %+v", status, v)
		}
	}
	h, f := finishedSale(50, 10, "item")
	f.Cancelled = map[string]bool{"t0": true}
	f.Orders["t0"] = Order{Found: true, Status: "CANCELLED", Reason: "cancelled by the buyer"}
	f.Orders["t1"] = Order{Found: true, Status: "CANCELLED", Reason: sale.ReasonExpired}
	f.Stats.Cancelled = 2
	f.Events = map[string][]string{"t0": {"created", "cancelled"}, "t1": {"created", "expired"}}
	for i := 2; i < 10; i++ {
		f.Events[fmt.Sprint("t", i)] = []string{"created"}
	}
	if v := Check(h, f); v.EventsOff != 0 {
		t.Fatalf("the events of a cancelled and an expired order: %+v", v.Problems)
	}
	f.Events["t0"], f.Events["t1"] = f.Events["t1"], f.Events["t0"]
	if v := Check(h, f); v.EventsOff != 2 {
		t.Fatalf("an expiry heard of an order its owner cancelled, and a cancel of one that expired: %d off, want 2", v.EventsOff)
	}
	// A cancel that got no answer may have been made, or not: either story is the order's.
	f.CancelUnanswered = map[string]bool{"t1": true}
	if v := Check(h, f); v.EventsOff != 1 {
		t.Fatalf("a cancel heard of an order whose owner's cancel got no answer: %d off, want only t0's", v.EventsOff)
	}
	// An owner's cancel sent after the window closed, answered 200 for an order the sweeper had
	// closed just before (a cancel of a cancelled order changes nothing): the order's reason
	// says it expired, and so do its events (Sentinel seed 34, 12 such orders).
	f.CancelUnanswered = nil
	f.Events["t0"], f.Events["t1"] = []string{"created", "expired"}, []string{"created", "expired"}
	f.Orders["t0"] = Order{Found: true, Status: "CANCELLED", Reason: sale.ReasonExpired}
	if v := Check(h, f); v.EventsOff != 0 || v.Lost != 0 {
		t.Fatalf("an owner's cancel answered after the sweeper closed the order: %v", v.Problems)
	}
	// Closed by a sweeper whose clock a skew stepped back between its choice and its close
	// (Sentinel seed 48): stamped before the window's end, by less than two clocks' skew.
	end := time.Date(2026, 12, 6, 3, 49, 45, 610e6, time.UTC)
	f.Orders["t1"] = Order{Found: true, Status: "CANCELLED", Reason: sale.ReasonExpired, ExpiresAt: end,
		ClosedAt: end.Add(-300 * time.Millisecond)}
	if v := Check(h, f); v.Lost != 0 {
		t.Fatalf("an expiry stamped early by a skewed sweeper: %v", v.Problems)
	}
}

// TestCheckCatchesEachViolation injects one fault at a time into a correct sale; the checker must
// report it under its name, and only it.
func TestCheckCatchesEachViolation(t *testing.T) {
	tests := []struct {
		name   string
		kind   string
		inject func(h []Record, f *Facts) []Record
		want   func(v Verdict) int64
		phrase string
	}{
		{"oversell by the history", "item", func(h []Record, f *Facts) []Record {
			h[len(h)-1] = Record{User: "u49", Outcome: Won, Status: 202, Token: "extra"}
			f.Orders["extra"] = Order{Found: true, Status: "CREATED"}
			f.Stats.Created++
			return h
		}, func(v Verdict) int64 { return v.Oversell }, "of a stock of 10"},
		{"oversell seen only in the database", "item", func(h []Record, f *Facts) []Record {
			h[len(h)-1] = Record{User: "u49", Outcome: Error, Status: 503}
			f.Stats.Created++
			return h
		}, func(v Verdict) int64 { return v.Oversell }, "orders in the database"},
		{"two units for one user", "item", func(h []Record, f *Facts) []Record {
			h[1] = Record{User: "u0", Outcome: Won, Status: 202, Token: "second"} // u0's second click won
			f.Orders["second"] = Order{Found: true, Status: "CREATED"}
			f.Stats.Created++
			return h
		}, func(v Verdict) int64 { return v.Duplicates }, "u0 won 2 units"},
		{"one token for two users", "item", func(h []Record, f *Facts) []Record {
			h[len(h)-1] = Record{User: "u49", Outcome: Won, Status: 202, Token: "t0"}
			return h
		}, func(v Verdict) int64 { return v.Duplicates }, "given to u0 and to u49"},
		{"an order no grab explains", "item", func(h []Record, f *Facts) []Record {
			f.Stats.Created++
			return h
		}, func(v Verdict) int64 { return v.Duplicates }, "no acknowledged or unanswered grab"},
		{"lost order", "item", func(h []Record, f *Facts) []Record {
			delete(f.Orders, "t3")
			f.Stats.Created--
			return h
		}, func(v Verdict) int64 { return v.Lost }, "t3 of u3 has no order"},
		{"order failed after the 202", "item", func(h []Record, f *Facts) []Record {
			f.Orders["t4"] = Order{Found: true, Status: "FAILED"}
			f.Stats.Created--
			return h
		}, func(v Verdict) int64 { return v.Lost }, "ended FAILED"},
		{"undersell", "item", func(h []Record, f *Facts) []Record {
			h[0] = Record{User: "u0", Outcome: SoldOut, Status: 410}
			h[1] = Record{User: "u0", Outcome: SoldOut, Status: 410}
			delete(f.Orders, "t0")
			f.Stats.Created--
			return h
		}, func(v Verdict) int64 { return v.Undersell }, "1 of 10 units unsold"},
		{"a grab won after the end was answered", "item", func(h []Record, f *Facts) []Record {
			f.Ended, f.EndMade = 1_000, true
			h[4].Start = 2_000 // u2's win, sent a millisecond after the end's answer
			return h
		}, func(v Verdict) int64 { return v.AfterEnd }, "after the end was answered won"},
		{"a paid order cancelled", "item", func(h []Record, f *Facts) []Record {
			f.Paid = map[string]bool{"t5": true}
			f.Orders["t5"] = Order{Found: true, Status: "CANCELLED"}
			f.Stats.Created--
			f.Stats.Cancelled++
			return h
		}, func(v Verdict) int64 { return v.Lost }, "t5 of u5 was paid and ended CANCELLED"},
		{"an unpaid order never released", "item", func(h []Record, f *Facts) []Record {
			f.Unpaid = map[string]bool{"t6": true}
			return h
		}, func(v Verdict) int64 { return v.Unreleased }, "never paid, is CREATED"},
		{"a cancelled order still held", "item", func(h []Record, f *Facts) []Record {
			f.Cancelled = map[string]bool{"t6": true}
			return h
		}, func(v Verdict) int64 { return v.Unreleased }, "t6 of u6, cancelled by its owner, is CREATED"},
		{"two units held after a cancel", "item", func(h []Record, f *Facts) []Record {
			// u0 cancels t0 and wins twice more: one unit again is theirs, the second is not.
			f.Cancelled = map[string]bool{"t0": true}
			f.Orders["t0"] = Order{Found: true, Status: "CANCELLED"}
			h[1] = Record{User: "u0", Outcome: Won, Status: 202, Token: "again"}
			h = append(h, Record{User: "u0", Outcome: Won, Status: 202, Token: "more"})
			f.Orders["again"], f.Orders["more"] = Order{Found: true, Status: "CREATED"}, Order{Found: true, Status: "CREATED"}
			f.Stock += 2 // the units are there: only the limit is broken
			f.Stats.Stock, f.Stats.Created, f.Stats.Cancelled = f.Stats.Stock+2, f.Stats.Created+1, 1
			return h
		}, func(v Verdict) int64 { return v.Duplicates }, "u0 won 2 units, the limit is 1"},
		{"a late payment neither kept nor refunded", "item", func(h []Record, f *Facts) []Record {
			f.Late = map[string]bool{"t7": true}
			f.Orders["t7"] = Order{Found: true, Status: "CANCELLED"}
			f.Stats.Created--
			f.Stats.Cancelled++
			return h
		}, func(v Verdict) int64 { return v.Unsettled }, "paid late, is CANCELLED"},
		{"a payment whose order is neither paid nor refunded", "item", func(h []Record, f *Facts) []Record {
			f.Payments = []paymentFact{{id: "pay1", token: "t1", status: "CREATED", answers: []string{"200"}}}
			return h
		}, func(v Verdict) int64 { return v.Unsettled }, "neither kept nor refunded"},
		{"a callback the server failed", "item", func(h []Record, f *Facts) []Record {
			f.Orders["t1"] = Order{Found: true, Status: "PAID"}
			f.Stats.Created--
			f.Stats.Paid++
			f.Payments = []paymentFact{{id: "pay1", token: "t1", status: "PAID", answers: []string{"200", "503"}, refused: 1}}
			return h
		}, func(v Verdict) int64 { return v.Unsettled }, "refused its notices [200 503]"},
		{"a forged callback taken", "item", func(h []Record, f *Facts) []Record {
			f.Orders["t1"] = Order{Found: true, Status: "PAID"}
			f.Stats.Created--
			f.Stats.Paid++
			f.Payments = []paymentFact{{id: "pay1", token: "t1", status: "PAID", answers: []string{"200"}, forgedOK: true}}
			return h
		}, func(v Verdict) int64 { return v.ForgedAccepted }, "forged notice of payment pay1"},
		{"a late payment the server never refunded itself", "item", func(h []Record, f *Facts) []Record {
			f.Orders["t1"] = Order{Found: true, Status: "REFUND_PENDING"}
			f.Stats.Created--
			f.Stats.RefundPending++
			f.Payments = []paymentFact{{id: "pay1", token: "t1", amount: 990, status: "REFUND_PENDING", answers: []string{"success"},
				refunding: true}}
			f.Refunds = map[string]int64{}
			return h
		}, func(v Verdict) int64 { return v.Unsettled }, "never refunded it"},
		{"a payment refunded without the provider's refund", "item", func(h []Record, f *Facts) []Record {
			f.Orders["t1"] = Order{Found: true, Status: "REFUNDED"}
			f.Stats.Created--
			f.Stats.Refunded++
			f.Payments = []paymentFact{{id: "pay1", token: "t1", amount: 990, status: "REFUNDED", answers: []string{"success"},
				refunding: true}}
			f.Refunds = map[string]int64{"rf_pay1": 900}
			return h
		}, func(v Verdict) int64 { return v.RefundsOff }, "rf_pay1: 900 cents"},
		{"a refund of money kept", "item", func(h []Record, f *Facts) []Record {
			f.Orders["t1"] = Order{Found: true, Status: "PAID"}
			f.Stats.Created--
			f.Stats.Paid++
			f.Payments = []paymentFact{{id: "pay1", token: "t1", amount: 990, status: "PAID", answers: []string{"success"}, refunding: true}}
			f.Refunds = map[string]int64{"rf_pay1": 990}
			return h
		}, func(v Verdict) int64 { return v.RefundsOff }, "of no payment the server says it refunded"},
		{"an order's events out of order", "item", func(h []Record, f *Facts) []Record {
			f.Events = map[string][]string{}
			for tok := range f.Orders {
				f.Events[tok] = []string{"created"}
			}
			f.Orders["t2"] = Order{Found: true, Status: "PAID"}
			f.Stats.Created--
			f.Stats.Paid++
			f.Events["t2"] = []string{"paid", "created"}
			return h
		}, func(v Verdict) int64 { return v.EventsOff }, "arrived [paid created]"},
		{"an order's expiry sent while it is still open", "item", func(h []Record, f *Facts) []Record {
			f.Events = map[string][]string{}
			for tok := range f.Orders {
				f.Events[tok] = []string{"created"}
			}
			// read again during the settle, it was still CREATED: the expiry is not its
			f.Events["t2"] = []string{"created", "expired"}
			return h
		}, func(v Verdict) int64 { return v.EventsOff }, "t2 of u2 ended CREATED; its events arrived [created expired]"},
		{"an order closed as expired before its window closed", "item", func(h []Record, f *Facts) []Record {
			end := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
			f.Orders["t2"] = Order{Found: true, Status: "CANCELLED", Reason: sale.ReasonExpired, ExpiresAt: end,
				ClosedAt: end.Add(-2*MaxClockSkew - time.Millisecond)}
			f.Stats.Created--
			f.Stats.Cancelled++
			return h
		}, func(v Verdict) int64 { return v.Lost }, "before its window closed"},
		{"an order's event missing", "item", func(h []Record, f *Facts) []Record {
			f.Events = map[string][]string{}
			for tok := range f.Orders {
				f.Events[tok] = []string{"created"}
			}
			delete(f.Events, "t3")
			return h
		}, func(v Verdict) int64 { return v.EventsOff }, "t3 of u3 ended CREATED; its events arrived []"},
		{"a webhook post unsigned", "item", func(h []Record, f *Facts) []Record {
			f.Unsigned = 2
			return h
		}, func(v Verdict) int64 { return v.EventsOff }, "2 webhook posts failed their signature"},
		{"shares over the total", "redpacket", func(h []Record, f *Facts) []Record {
			f.TotalCents -= 5
			return h
		}, func(v Verdict) int64 { return v.SharesOff }, "more than the"},
		{"an order's amount differs from its grab's", "redpacket", func(h []Record, f *Facts) []Record {
			f.Orders["t2"] = Order{Found: true, Status: "CREATED", AmountCents: 7}
			return h
		}, func(v Verdict) int64 { return v.SharesOff }, "answered 100 cents, its order holds 7"},
		{"the leaderboard out of order", "redpacket", func(h []Record, f *Facts) []Record {
			f.Board[0], f.Board[1] = f.Board[1], f.Board[0]
			return h
		}, func(v Verdict) int64 { return v.BoardOff }, "place 1 of the leaderboard is 100 cents"},
		{"the leaderboard lists a share nobody holds", "redpacket", func(h []Record, f *Facts) []Record {
			f.Board = append(f.Board, 55)
			return h
		}, func(v Verdict) int64 { return v.BoardOff }, "lists 11 shares, the orders hold 10"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, f := finishedSale(50, 10, tc.kind)
			h = tc.inject(h, &f)
			v := Check(h, f)
			if v.OK() || tc.want(v) == 0 {
				t.Fatalf("not caught: %+v", v)
			}
			if !strings.Contains(strings.Join(v.Problems, "\n"), tc.phrase) {
				t.Fatalf("problems %q do not say %q", v.Problems, tc.phrase)
			}
		})
	}
}

// TestCheckAllowsAnUnansweredGrab: a request that got a 503 may have taken a unit (Redis ran the
// script, the reply was lost); its order is no duplicate.
func TestCheckAllowsAnUnansweredGrab(t *testing.T) {
	h, f := finishedSale(50, 10, "item")
	h[0] = Record{User: "u0", Outcome: Error, Status: 0, Err: "connection reset"}
	delete(f.Orders, "t0") // the checker never learnt its token
	v := Check(h, f)
	if !v.OK() || v.Unanswered != 1 {
		t.Fatalf("verdict %+v", v)
	}
}

// TestCheckCountsRestockedUnits: a cancelled order's unit went back; it is neither held nor lost,
// and a crowd that did not buy it again is not an undersell only when demand ran out.
func TestCheckCountsRestockedUnits(t *testing.T) {
	h, f := finishedSale(10, 10, "item") // every user wins: demand == stock
	f.Orders["t0"] = Order{Found: true, Status: "CANCELLED"}
	f.Stats.Created, f.Stats.Cancelled = 9, 1
	v := Check(h, f)
	if !v.OK() || v.Restocked != 1 {
		t.Fatalf("verdict %+v", v)
	}
}

// TestCheckHoldsMovedOrdersToTheirEvents: an unpaid order read CREATED whose window closed
// while its events were awaited, read again CANCELLED (Facts.Moved), has its expiry's event
// held to what it became; the stock's count stays the one read with the stats.
func TestCheckHoldsMovedOrdersToTheirEvents(t *testing.T) {
	h, f := finishedSale(50, 10, "item")
	f.Events = map[string][]string{}
	for tok := range f.Orders {
		f.Events[tok] = []string{"created"}
	}
	f.Events["t4"] = []string{"created", "expired"}
	f.Moved = map[string]sale.Status{"t4": sale.StatusCancelled}
	if v := Check(h, f); !v.OK() || v.Restocked != 0 {
		t.Fatalf("verdict %+v", v)
	}
	f.Events["t4"] = []string{"created", "expired", "refunded"}
	if v := Check(h, f); v.EventsOff != 1 {
		t.Fatalf("an event beyond the moved status: verdict %+v", v)
	}
}

func TestHistoryRoundTrip(t *testing.T) {
	h, _ := finishedSale(5, 2, "item")
	h[0].Intended, h[0].Start, h[0].End = 1, 2, 3
	var buf bytes.Buffer
	if err := WriteHistory(&buf, h); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), "\n"); n != len(h) {
		t.Fatalf("%d lines for %d records", n, len(h))
	}
	got, err := ReadHistory(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(h, got); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
	if _, err := ReadHistory(strings.NewReader("{\"user\":\"a\"}\nnot json\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("a broken line: %v", err)
	}
}

// TestCheckLetsAnEndedSaleKeepItsUnits: a sale the operator ended keeps the units it had not
// sold, whether the end was in force when answered (200) or pending in the gate (202, no moment
// promised): neither is an undersell; an end that was not made is no excuse.
func TestCheckLetsAnEndedSaleKeepItsUnits(t *testing.T) {
	h, f := finishedSale(50, 10, "item")
	h[0] = Record{User: "u0", Outcome: SoldOut, Status: 410}
	h[1] = Record{User: "u0", Outcome: SoldOut, Status: 410}
	delete(f.Orders, "t0")
	f.Stats.Created--
	for _, c := range []struct {
		name   string
		ended  int64
		made   bool
		unsold int64
	}{{"in force", 1_000, true, 0}, {"pending", 0, true, 0}, {"not made", 0, false, 1}} {
		f.Ended, f.EndMade = c.ended, c.made
		if v := Check(h, f); v.Undersell != c.unsold || v.AfterEnd != 0 {
			t.Errorf("an end %s: %d undersold, %d after the end (%q); want %d undersold", c.name, v.Undersell, v.AfterEnd,
				v.Problems, c.unsold)
		}
	}
}
