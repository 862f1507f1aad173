package bench

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"seckill/internal/httpapi/wire"
	"seckill/internal/sale"
)

// Facts are what the checker learns from the API once the queue has drained: the activity as it
// was created, each acknowledged grab's order as its owner sees it, and the server's counters.
type Facts struct {
	Stock        int64
	PerUserLimit int64
	Kind         string // "item" or "redpacket"
	TotalCents   int64  // red packets: the amount split into Stock shares
	// Orders holds, for every order token the history acknowledged, the answer of
	// GET /api/orders/{token} asked as the grab's user.
	Orders map[string]Order
	Stats  wire.StatsResponse
	// Paid are the orders bench paid (the server answered PAID, or the provider called back in
	// time); Unpaid those it left to expire; Late those whose provider called back after the
	// window (kept if the sweeper had not closed it yet, else refunded). Empty unless the run had
	// --unpaid.
	Paid, Unpaid, Late map[string]bool
	// Cancelled are the orders their owners cancelled, answered 200: each must be CANCELLED.
	// Non-nil, the run's buyers cancel: a unit cancelled does not count to its buyer's limit.
	// CancelUnanswered are those whose owner's cancel got no answer or a server error: it may
	// have been made, and their events may tell of a cancel or of an expiry.
	Cancelled, CancelUnanswered map[string]bool
	// Payments are the simulated provider's payments, and Events what its webhook receiver got
	// of each order (event types without "order.", in the order they came); nil without one.
	Payments []paymentFact
	Events   map[string][]string
	// Moved are the orders whose status moved on after Orders read them, while their events
	// were awaited (an unpaid order's window closed during the settle), with the status they
	// were read again with: their events are held to it, the stock's count to Orders.
	Moved map[string]sale.Status
	// Unsigned counts the webhook posts whose signature failed.
	Unsigned int
	// Refunds are the refunds the provider made at the server's request (refund id -> cents),
	// with a provider the server refunds through by itself; nil otherwise.
	Refunds map[string]int64
	// Board is a red packet's leaderboard as the server lists it (the amounts of its top
	// entries, in order); nil when none was read.
	Board []int64
	// Ended is when an operator's end of the sale was answered in force (200; Unix µs; 0: not
	// ended so): a grab sent after it must not win. EndMade says an end was made, in force or
	// pending in the gate (202: in force at some moment after its send): the units left are not
	// undersold. ChangesFailed counts the operator's changes the server did not make.
	Ended         int64
	EndMade       bool
	ChangesFailed int64
}

// Order is an order as the API shows it to its owner. Found is false for a 404.
type Order struct {
	Found       bool
	Status      sale.Status
	AmountCents int64
	// Reason is why a cancelled order was closed (sale.ReasonExpired: its window closed; else
	// its owner's cancel); ExpiresAt is the end of its window, ClosedAt when it was closed.
	Reason              string
	ExpiresAt, ClosedAt time.Time
}

// Verdict is what the checker found. Every field named after a violation is zero in a correct
// sale; Problems says what each non-zero one is made of.
type Verdict struct {
	Requests int64 `json:"requests"`
	Wins     int64 `json:"wins"` // distinct order tokens acknowledged
	Stock    int64 `json:"stock"`
	// Demand is the units the crowd asked for and the server decided on: per user, the lesser of
	// the limit and its clicks answered won, already bought or sold out (a click that failed or
	// was turned away by a rate limit asked for nothing the server had to sell).
	Demand int64 `json:"demand"`
	// Unanswered requests got no answer or a 5xx: each may have taken a unit unseen.
	Unanswered int64 `json:"unanswered"`
	Restocked  int64 `json:"restocked"` // acknowledged grabs whose order was cancelled (the unit went back)

	Oversell   int64 `json:"oversell"`   // units held beyond the stock
	Undersell  int64 `json:"undersell"`  // units left unsold although the demand exceeded the stock
	Duplicates int64 `json:"duplicates"` // wins beyond a user's limit, tokens given twice, orders no grab explains
	Lost       int64 `json:"lost"`       // acknowledged grabs without a placed order; paid orders not PAID; orders expired early
	// Unreleased are orders left unpaid that still hold their unit after the payment window,
	// and orders their owners cancelled that are not CANCELLED.
	Unreleased int64 `json:"unreleased"`
	// SharesOff is how far the red-packet amounts are from the total: the sum of the won
	// amounts must never exceed it and must equal it once every share is taken; each order's
	// amount must equal its grab's.
	SharesOff int64 `json:"shares_off_cents"`
	// BoardOff counts the places where a red packet's leaderboard disagrees with the orders:
	// its top must list the largest held shares, largest first.
	BoardOff int64 `json:"board_off"`
	// With a payment provider: Unsettled counts payments neither kept (their order PAID) nor
	// refunded (REFUND_PENDING or REFUNDED), and callbacks the server failed; ForgedAccepted
	// forged callbacks not refused; EventsOff the orders whose events did not all arrive, in
	// the order they happened, and the webhook posts whose signature failed.
	Unsettled      int64 `json:"unsettled_payments"`
	ForgedAccepted int64 `json:"forged_accepted"`
	// RefundsOff counts, with a provider the server refunds through by itself, the payments
	// REFUNDED without the provider's refund of what they received, and the provider's refunds
	// of no payment refunded (money given back twice, or that was kept).
	RefundsOff int64 `json:"refunds_off"`
	EventsOff  int64 `json:"events_off"`
	// With an operator (--operator): AfterEnd counts the grabs sent after the sale's end was
	// answered that won, on any node; ChangesFailed the operator's changes refused or failed.
	AfterEnd      int64 `json:"after_end"`
	ChangesFailed int64 `json:"changes_failed"`
	// In a nemesis run: Linear is the stock's linearizability check (CheckStock), NotLinear 1
	// when it found no order of the stock's operations that explains the answers.
	Linear    *Linearity `json:"linearizable,omitempty"`
	NotLinear int64      `json:"not_linearizable"`

	Problems []string `json:"problems,omitempty"`
}

// OK reports whether the sale kept every invariant.
func (v Verdict) OK() bool {
	return v.Oversell == 0 && v.Undersell == 0 && v.Duplicates == 0 && v.Lost == 0 && v.Unreleased == 0 &&
		v.SharesOff == 0 && v.BoardOff == 0 && v.Unsettled == 0 && v.ForgedAccepted == 0 && v.RefundsOff == 0 && v.EventsOff == 0 &&
		v.AfterEnd == 0 && v.ChangesFailed == 0 && v.NotLinear == 0
}

// holdLinear adds l, the stock's linearizability check, to v.
func (v *Verdict) holdLinear(l Linearity) {
	v.Linear = &l
	if l.Result == LinearIllegal {
		v.NotLinear = 1
		v.Problems = append(v.Problems, "linearizability: no order of the stock's operations explains the answers; stuck at "+l.Stuck)
	}
}

// maxProblems caps the examples kept per kind of violation.
const maxProblems = 5

// Check verifies a finished sale from its history and the facts read back from the API.
func Check(history []Record, f Facts) Verdict {
	v := Verdict{Requests: int64(len(history)), Stock: f.Stock}
	seen := map[string]int{} // per kind of problem, how many were reported
	problem := func(kind, format string, args ...any) {
		if seen[kind]++; seen[kind] <= maxProblems {
			v.Problems = append(v.Problems, kind+": "+fmt.Sprintf(format, args...))
		}
	}

	clicks := map[string]int64{}
	owner := map[string]string{} // token -> user
	amount := map[string]int64{} // token -> amount the grab answered
	winsOf := map[string]int64{} // user -> distinct tokens won
	for _, r := range history {
		if r.Outcome == Won || r.Outcome == AlreadyBought || r.Outcome == SoldOut {
			clicks[r.User]++
		}
		if r.unanswered() {
			v.Unanswered++
		}
		if r.Outcome != Won {
			continue
		}
		if f.Ended != 0 && r.Start > f.Ended {
			problem("after end", "%s's grab sent %.3f s after the end was answered won on node %d", r.User, float64(r.Start-f.Ended)/1e6, r.Node)
			v.AfterEnd++
		}
		if r.Token == "" {
			problem("duplicates", "%s won without an order token", r.User)
			v.Duplicates++
			continue
		}
		if u, ok := owner[r.Token]; ok {
			if u != r.User {
				problem("duplicates", "order token %s given to %s and to %s", r.Token, u, r.User)
				v.Duplicates++
			}
			continue // the same user's repeated key: the first answer again
		}
		owner[r.Token] = r.User
		amount[r.Token] = r.Amount
		// A unit that went back (its buyer cancelled, its window closed, a late payment's money
		// went back): in a run whose buyers cancel and whose windows close within it, the buyer
		// may win again, within the limit.
		if f.Cancelled == nil || !gaveBack(f.Orders[r.Token].Status) {
			winsOf[r.User]++
		}
	}
	v.Wins = int64(len(owner))
	limit := max(f.PerUserLimit, 1)
	for _, n := range clicks {
		v.Demand += min(n, limit)
	}
	for _, u := range sortedKeys(winsOf) {
		if n := winsOf[u]; n > limit {
			problem("duplicates", "%s won %d units, the limit is %d", u, n, limit)
			v.Duplicates += n - limit
		}
	}

	var held, sum int64 // units held at the end; amounts of the held shares
	var heldAmounts []int64
	for _, tok := range sortedKeys(owner) {
		o := f.Orders[tok]
		switch {
		case !o.Found:
			problem("lost", "acknowledged grab %s of %s has no order", tok, owner[tok])
			v.Lost++
			continue
		case gaveBack(o.Status):
			v.Restocked++ // the unit went back on sale (a late payment's order too: its money goes back)
		case o.Status == sale.StatusCreated || o.Status == sale.StatusPaid:
			held++
		default: // PENDING after the drain, FAILED
			problem("lost", "acknowledged grab %s of %s ended %s", tok, owner[tok], o.Status)
			v.Lost++
			continue
		}
		switch {
		case f.Paid[tok] && o.Status != sale.StatusPaid:
			problem("lost", "order %s of %s was paid and ended %s", tok, owner[tok], o.Status)
			v.Lost++
		case f.Cancelled[tok] && o.Status != sale.StatusCancelled:
			problem("unreleased", "order %s of %s, cancelled by its owner, is %s", tok, owner[tok], o.Status)
			v.Unreleased++
		case o.Status == sale.StatusCancelled && o.Reason == sale.ReasonExpired && o.ClosedAt.Add(2*MaxClockSkew).Before(o.ExpiresAt):
			// The window's end is the granting node's clock, the close the sweeper's: each may be
			// MaxClockSkew off, and a skew struck mid-sweep steps the sweeper's back between its
			// choice and its close (Sentinel seed 48: closes stamped 0.1-0.3 s early).
			problem("lost", "order %s of %s was closed as expired at %s, %v before its window closed at %s", tok, owner[tok],
				o.ClosedAt.Format(time.RFC3339Nano), 2*MaxClockSkew, o.ExpiresAt.Format(time.RFC3339Nano))
			v.Lost++
		case f.Unpaid[tok] && o.Status != sale.StatusCancelled:
			problem("unreleased", "order %s of %s, never paid, is %s after its payment window", tok, owner[tok], o.Status)
			v.Unreleased++
		case f.Late[tok] && o.Status != sale.StatusPaid && o.Status != sale.StatusRefundPending && o.Status != sale.StatusRefunded:
			problem("unsettled", "order %s of %s, paid late, is %s: neither kept nor refunded", tok, owner[tok], o.Status)
			v.Unsettled++
		}
		if f.Events != nil {
			status := o.Status
			if moved, ok := f.Moved[tok]; ok {
				status = moved
			}
			byOwner := f.Cancelled[tok]
			if status == sale.StatusCancelled && o.Status == sale.StatusCancelled && o.Reason != "" {
				// The order says who closed it: an owner's cancel answered 200 may be the
				// answer to an order the sweeper had just closed (a repeat changes nothing).
				byOwner = o.Reason != sale.ReasonExpired
			}
			want, got := eventsOf(status, byOwner), f.Events[tok]
			if f.CancelUnanswered[tok] && !slices.Equal(want, got) {
				want = eventsOf(status, !byOwner)
			}
			if !slices.Equal(want, got) {
				problem("events", "order %s of %s ended %s; its events arrived %v, want %v", tok, owner[tok], status, got, want)
				v.EventsOff++
			}
		}
		if f.Kind == "redpacket" {
			if o.AmountCents != amount[tok] {
				problem("shares", "grab %s answered %d cents, its order holds %d", tok, amount[tok], o.AmountCents)
				v.SharesOff += abs(o.AmountCents - amount[tok])
			}
			if o.Status == sale.StatusCreated || o.Status == sale.StatusPaid {
				sum += amount[tok]
				heldAmounts = append(heldAmounts, o.AmountCents)
			}
		}
	}

	// The server may hold more than the history shows only through unanswered requests.
	dbHeld := f.Stats.Created + f.Stats.Paid
	refunded := map[string]bool{} // the refund ids of the payments whose money went back
	for _, pm := range f.Payments {
		switch {
		case pm.status != sale.StatusPaid && pm.status != sale.StatusRefundPending && pm.status != sale.StatusRefunded:
			problem("unsettled", "payment %s of order %s: the order is %s, neither kept nor refunded (its notices were answered %q)",
				pm.id, pm.token, pm.status, pm.answers)
			v.Unsettled++
		case pm.refused > 0:
			problem("unsettled", "payment %s: the server refused its notices %v", pm.id, pm.answers)
			v.Unsettled++
		case pm.refunding && pm.status == sale.StatusRefundPending:
			problem("unsettled", "payment %s of order %s: owed back, and the server never refunded it", pm.id, pm.token)
			v.Unsettled++
		}
		if pm.refunding && pm.status == sale.StatusRefunded {
			id := sale.RefundID(pm.id)
			refunded[id] = true
			if got, ok := f.Refunds[id]; !ok || got != pm.amount {
				problem("refunds", "payment %s of order %s is REFUNDED; the provider's refund %s: %d cents (made: %v), want %d",
					pm.id, pm.token, id, got, ok, pm.amount)
				v.RefundsOff++
			}
		}
		if pm.forgedOK {
			problem("forged", "a forged notice of payment %s was not refused", pm.id)
			v.ForgedAccepted++
		}
	}
	for _, id := range sortedKeys(f.Refunds) {
		if !refunded[id] {
			problem("refunds", "the provider made refund %s of %d cents, of no payment the server says it refunded", id, f.Refunds[id])
			v.RefundsOff++
		}
	}
	if f.Unsigned > 0 {
		problem("events", "%d webhook posts failed their signature", f.Unsigned)
		v.EventsOff += int64(f.Unsigned)
	}
	closed := f.Stats.Cancelled + f.Stats.RefundPending + f.Stats.Refunded
	if extra := f.Stats.Created + f.Stats.Paid + closed - v.Wins - v.Unanswered; extra > 0 {
		problem("duplicates", "%d orders in the database that no acknowledged or unanswered grab accounts for", extra)
		v.Duplicates += extra
	}
	if over := max(held, dbHeld) - f.Stock; over > 0 {
		problem("oversell", "%d units held (%d by acknowledged grabs, %d orders in the database) of a stock of %d",
			max(held, dbHeld), held, dbHeld, f.Stock)
		v.Oversell = over
	}
	if f.ChangesFailed > 0 {
		problem("changes", "%d of the operator's changes were not made", f.ChangesFailed)
		v.ChangesFailed = f.ChangesFailed
	}
	if v.Demand >= f.Stock+v.Restocked && !f.EndMade { // an ended sale keeps what it did not sell
		if short := f.Stock - max(held, dbHeld); short > 0 {
			problem("undersell", "%d of %d units unsold although %d were asked for", short, f.Stock, v.Demand)
			v.Undersell = short
		}
	}
	if f.Kind == "redpacket" {
		switch {
		case sum > f.TotalCents:
			problem("shares", "the won shares sum to %d cents, more than the %d split", sum, f.TotalCents)
			v.SharesOff += sum - f.TotalCents
		case held == f.Stock && sum != f.TotalCents:
			problem("shares", "every share is taken but they sum to %d cents, not %d", sum, f.TotalCents)
			v.SharesOff += f.TotalCents - sum
		}
		if f.Board != nil {
			sort.Slice(heldAmounts, func(i, j int) bool { return heldAmounts[i] > heldAmounts[j] })
			want := heldAmounts[:min(len(heldAmounts), len(f.Board))]
			if len(f.Board) > len(heldAmounts) {
				problem("leaderboard", "the leaderboard lists %d shares, the orders hold %d", len(f.Board), len(heldAmounts))
				v.BoardOff += int64(len(f.Board) - len(heldAmounts))
			}
			for i, a := range want {
				if f.Board[i] != a {
					problem("leaderboard", "place %d of the leaderboard is %d cents, the orders' %d largest share is %d",
						i+1, f.Board[i], i+1, a)
					v.BoardOff++
				}
			}
		}
	}
	return v
}

// eventsOf is what a receiver hears of an order that ended in status, in order: its creation,
// then its payment, its cancel by its owner (byOwner) or its expiry, and for a payment that came
// after the expiry, the refund asked.
func eventsOf(status sale.Status, byOwner bool) []string {
	switch status {
	case sale.StatusCreated:
		return []string{"created"}
	case sale.StatusPaid:
		return []string{"created", "paid"}
	case sale.StatusCancelled:
		if byOwner {
			return []string{"created", "cancelled"}
		}
		return []string{"created", "expired"}
	case sale.StatusRefundPending:
		return []string{"created", "expired", "refund_requested"}
	case sale.StatusRefunded:
		return []string{"created", "expired", "refund_requested", "refunded"}
	}
	return []string{"failed"}
}

// gaveBack says an order in status gave its unit back: cancelled (by its owner or at the end of
// its window), or owed back a payment that came after that.
func gaveBack(status sale.Status) bool {
	return status == sale.StatusCancelled || status == sale.StatusRefundPending || status == sale.StatusRefunded
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
