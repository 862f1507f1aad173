package bench

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
	"time"
)

// Linearizability of an activity's stock. The other checks count: no more units held than the
// stock, none left unsold. This one orders: is there one sequence of the activity's stock
// operations, each placed between its send and its answer, in which every answer is what a
// single counter would have said at that point? A grab answered 202 must have found a unit; a
// grab answered 410 SOLD_OUT must have found none, at some instant while it was in flight. A
// node answering sold out from a stale flag after the operator's added stock was answered, a
// unit handed out twice in one instant, a 202 after the last unit went: each leaves no such
// sequence.
//
// The model is a counter whose value is known only within bounds, as some effects are uncertain.
// Its state is the certain count c, the units b that may have come back and the units m that may
// have been taken unseen: the value lies in [c - m, c + b].
//
//   - a grab answered 202 takes a unit: c + b must be above 0, and c goes down by one;
//   - a grab answered 410 finds none: c - m must be 0 or below;
//   - the operator's added stock arrives within the change's call: c goes up;
//   - a grab never answered, or answered only with server errors, may have taken a unit at any
//     moment after its send (a stopped node may run it long after its client gave up): m + 1;
//   - an unanswered change may have added its stock: b + n;
//   - a unit given back (its order cancelled, expired or refunded) may be back from the owner's
//     cancel, or from the payment window's close after the grab (less twice the clock skew the
//     deployment bears: the window opens on the answering node's clock and closes on the
//     sweeper's), on: b + 1. A cancel gives it back before answering unless the gate is
//     down, when the restock is owed and given later, at a moment no client sees.
//
// The uncertain effects stay uncertain (nothing resolves them), so each only loosens a bound
// from the earliest moment it may happen on: they are checked there, as instants. The price: a
// unit given back never raises the lower bound, so a sold out answered while such a unit was
// surely back (a stale sold-out flag after a cancel) is not caught; after added stock it is.
//
// The state after a set of operations does not depend on their order, so wherever no operation
// is in flight the state is known, and the history is checked piece by piece between such
// moments, each piece from the state the ones before it leave. A piece is searched as Wing and
// Gong do (one operation after another, each sent before the earliest answer of those left), but
// the model spares the search most of its choices (piece.order): of two takes, or two adds of one
// amount, the one answered first may go first; an operation that can only help the rest (a 410
// the state allows now, an unanswered grab, a unit maybe back) goes at once; what is left to try
// both ways is a take against an add in flight with it. Without adds a piece takes time
// quadratic in its length, where a general search is exponential in the grabs in flight at once
// (which a failover holds open together) in the worst case: Porcupine ran out of 30 s on four
// nemesis schedules (BENCHMARKS §19). A search that does not finish within its budget says
// unknown, not ok. TestCheckStockAgreesWithPorcupine checks the verdicts against Porcupine's
// (github.com/anishathalye/porcupine), which tries every order.
//
// Every click of one idempotency key is one grab, from its first send to the answer that
// decided it (a repeat's 410 may be the first send's answer, kept). Answers that say nothing of
// the stock (already bought, rate limited, ended) are left out.

// Linearity is the outcome of a stock's linearizability check.
type Linearity struct {
	Result  string  `json:"result"` // ok, illegal or unknown (the search ran out of time)
	Ops     int     `json:"ops"`    // the stock operations checked
	Seconds float64 `json:"seconds"`
	// Stuck says, for an illegal history, the first operation no order could place.
	Stuck string `json:"stuck,omitempty"`
}

// The results of a linearizability check.
const (
	LinearOK      = "ok"
	LinearIllegal = "illegal"
	LinearUnknown = "unknown"
)

// LinearBudget bounds the search of one activity's stock.
const LinearBudget = 30 * time.Second

// StockFacts are what the stock's check needs beyond the history.
type StockFacts struct {
	Initial   int64         // the units (or a packet's shares) the activity was created with
	PayWindow time.Duration // an order left unpaid gives its unit back after it
	// Orders are the acknowledged grabs' orders, by token, as the owners read them at the end.
	Orders map[string]Order
}

// stockOp is one operation on the stock.
type stockOp int

const (
	opTake      stockOp = iota // a unit taken (202)
	opEmpty                    // none found (410)
	opAdd                      // stock added (amount n)
	opMaybeTake                // an unanswered grab
	opMaybeAdd                 // stock maybe added (amount n): an unanswered change, a unit given back
)

type stockInput struct {
	op   stockOp
	n    int64
	what string // for a report: the user, the order or the change
}

// stock is the counter's state.
type stock struct{ c, b, m int64 }

// step applies in to s: whether it may happen in s, and the state after it.
func (s stock) step(in stockInput) (bool, stock) {
	switch in.op {
	case opTake:
		return s.c+s.b > 0, stock{s.c - 1, s.b, s.m}
	case opEmpty:
		return s.c-s.m <= 0, s
	case opAdd:
		return true, stock{s.c + in.n, s.b, s.m}
	case opMaybeTake:
		return true, stock{s.c, s.b, s.m + 1}
	default: // opMaybeAdd
		return true, stock{s.c, s.b + in.n, s.m}
	}
}

func (in stockInput) String() string {
	return fmt.Sprintf("%s %d %s", [...]string{"take", "none", "add", "maybe-take", "maybe-add"}[in.op], in.n, in.what)
}

// timedOp is a stock operation and its span: it takes effect at one moment between its send
// (call) and its answer (ret), in µs.
type timedOp struct {
	in        stockInput
	call, ret int64
}

// stockOps turns one activity's records into its stock operations.
func stockOps(records []Record, f StockFacts) []timedOp {
	var ops []timedOp
	add := func(call, ret int64, in stockInput) {
		ops = append(ops, timedOp{in: in, call: call, ret: max(ret, call)})
	}
	type key struct {
		first             int64 // its first send
		won, empty        *Record
		unanswered, other bool
	}
	keys := map[string]*key{}
	var order []string
	grabbed := map[string]int64{} // a token's grab's first send
	cancelled := map[string]int64{}
	// An order's window opens at its grab on the clock of the node that answered it and closes
	// on the sweeper's, each up to MaxClockSkew off the true time: up to twice that early (the
	// nemesis's Sentinel seed 205, an API node 422 ms behind and the worker 989 ms ahead).
	early := 2 * MaxClockSkew.Microseconds()
	for i := range records {
		r := &records[i]
		switch r.Op {
		case "":
			id := r.Key
			if id == "" {
				id = fmt.Sprintf("#%d", i) // a click without a key is a grab of its own
			}
			k, ok := keys[id]
			if !ok {
				k = &key{first: r.Start}
				keys[id] = k
				order = append(order, id)
			}
			k.first = min(k.first, r.Start)
			switch {
			case r.Outcome == Won:
				if k.won == nil || r.End < k.won.End {
					k.won = r
				}
			case r.Outcome == SoldOut:
				if k.empty == nil || r.End < k.empty.End {
					k.empty = r
				}
			case r.unanswered():
				k.unanswered = true
			case !r.NotSent:
				k.other = true
			}
		case OpCancel:
			if r.Token != "" && r.Status != http.StatusBadRequest {
				if t, ok := cancelled[r.Token]; !ok || r.Start < t {
					cancelled[r.Token] = r.Start
				}
			}
		case OpChange:
			var n int64
			if _, err := fmt.Sscanf(r.Detail, "add %d", &n); err != nil || n <= 0 {
				continue
			}
			switch {
			case r.Status == http.StatusOK:
				add(r.Start, r.End, stockInput{op: opAdd, n: n, what: r.Detail})
			case r.Status == http.StatusAccepted || r.Status == 0 || r.Status >= http.StatusInternalServerError:
				// Made but pending in the gate (202), or unanswered: on sale from some moment
				// after the send, or never.
				add(r.Start, r.Start, stockInput{op: opMaybeAdd, n: n, what: r.Detail})
			}
		}
	}
	for _, id := range order {
		k := keys[id]
		switch {
		case k.won != nil:
			add(k.first, k.won.End, stockInput{op: opTake, what: k.won.User})
			if t, ok := grabbed[k.won.Token]; !ok || k.first < t {
				grabbed[k.won.Token] = k.first
			}
		case k.empty != nil:
			add(k.first, k.empty.End, stockInput{op: opEmpty, what: k.empty.User})
		case k.unanswered:
			add(k.first, k.first, stockInput{op: opMaybeTake, what: id})
		}
	}
	for tok, at := range grabbed {
		if o := f.Orders[tok]; !o.Found || !gaveBack(o.Status) {
			continue
		}
		from := at + f.PayWindow.Microseconds() - early // its window closed, on two clocks off
		if c, ok := cancelled[tok]; ok {
			from = min(from, c)
		}
		add(from, from, stockInput{op: opMaybeAdd, n: 1, what: "back " + tok})
	}
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].call < ops[j].call })
	return ops
}

// CheckStock checks one activity's stock for linearizability (see Linearity) over its records,
// within budget.
func CheckStock(records []Record, f StockFacts, budget time.Duration) Linearity {
	return checkOps(stockOps(records, f), f.Initial, budget)
}

// checkOps checks ops, sorted by their sends, from a stock of initial units.
func checkOps(ops []timedOp, initial int64, budget time.Duration) (l Linearity) {
	began := time.Now()
	l = Linearity{Ops: len(ops), Result: LinearOK}
	defer func() { l.Seconds = time.Since(began).Seconds() }()
	state := stock{c: initial}
	for lo := 0; lo < len(ops); {
		// The piece: until a moment no operation is in flight.
		hi, until := lo+1, ops[lo].ret
		for hi < len(ops) && ops[hi].call <= until {
			until = max(until, ops[hi].ret)
			hi++
		}
		p := piece{ops: ops[lo:hi], from: state, deadline: began.Add(budget), tried: map[string]bool{}, furthest: -1}
		if !p.order(make([]bool, hi-lo), 0, state) {
			if p.outOfTime {
				l.Result = LinearUnknown
			} else {
				l.Result, l.Stuck = LinearIllegal, p.stuck
			}
			return l
		}
		for _, op := range p.ops {
			_, state = state.step(op.in)
		}
		lo = hi
	}
	return l
}

// piece is the search for an order of one piece's operations.
type piece struct {
	ops      []timedOp // sorted by their sends
	from     stock     // the state before the piece
	deadline time.Time
	// tried holds the sets of operations done (a bit each) from which no order was found, at the
	// points where the search had a choice.
	tried     map[string]bool
	steps     int
	outOfTime bool
	// furthest is how many operations the longest order the search found placed, and stuck
	// names the operation it could not place next.
	furthest int
	stuck    string
}

// order reports whether the operations not done (n of them are) can follow, from the state s,
// in an order that places each within its span. At each step the operations that may go next
// are those sent before the earliest answer of the ones left (Wing and Gong). Of those, it lets
// go at once every operation that can only help the rest: an unanswered grab (it only lowers
// the least the stock may be, which a 410 needs), a unit maybe back (it only raises the most the
// stock may be, which a 202 needs), and a 410 the state allows now (it changes nothing). Moving
// such an operation to the front of any order that places it later leaves that order valid.
// Of the grabs answered 202, only the one answered first is tried: two takes have the same
// effect, so an order that places the other first stays valid with the two swapped (the other
// then goes where the one answered first went, which was before that one's answer, so before
// its own). Adds of one amount are alike. What is left to choose is a take or an add; without
// adds, nothing, and the search is a single pass.
func (p *piece) order(done []bool, n int, s stock) bool {
	for n < len(p.ops) {
		if p.steps++; p.steps%1024 == 0 && time.Now().After(p.deadline) {
			p.outOfTime = true
			return false
		}
		last := int64(math.MaxInt64) // the earliest answer of the operations left
		for i, op := range p.ops {
			if !done[i] {
				last = min(last, op.ret)
			}
		}
		take, helped := -1, false
		var adds []int // the add answered first, of each amount
		for i, op := range p.ops {
			if op.call > last {
				break
			}
			if done[i] {
				continue
			}
			switch op.in.op {
			case opTake:
				if take < 0 || op.ret < p.ops[take].ret {
					take = i
				}
				continue
			case opAdd:
				j := slices.IndexFunc(adds, func(j int) bool { return p.ops[j].in.n == op.in.n })
				if j < 0 {
					adds = append(adds, i)
				} else if op.ret < p.ops[adds[j]].ret {
					adds[j] = i
				}
				continue
			case opEmpty:
				if ok, _ := s.step(op.in); !ok {
					continue
				}
			}
			done[i], n, helped = true, n+1, true
			_, s = s.step(op.in)
		}
		if helped {
			continue
		}
		canTake := take >= 0 && s.c+s.b > 0
		if len(adds) == 0 {
			if !canTake {
				p.deadEnd(done, n, last)
				return false
			}
			done[take], n = true, n+1
			_, s = s.step(p.ops[take].in)
			continue
		}
		// A choice: the take, if the state allows it, or an add.
		key := bits(done)
		if p.tried[key] {
			return false
		}
		if canTake {
			adds = append(adds, take)
		}
		for _, i := range adds {
			next := slices.Clone(done)
			next[i] = true
			_, after := s.step(p.ops[i].in)
			if p.order(next, n+1, after) {
				return true
			}
			if p.outOfTime {
				return false
			}
		}
		p.tried[key] = true
		return false
	}
	return true
}

// deadEnd notes a point no operation left can follow, n of them placed: the one answered first
// (at last), which the state does not allow, is where the furthest such point stuck.
func (p *piece) deadEnd(done []bool, n int, last int64) {
	if n <= p.furthest {
		return
	}
	p.furthest = n
	for i, op := range p.ops {
		if !done[i] && op.ret == last {
			p.stuck = fmt.Sprintf("%s, sent at %d µs and answered at %d µs, in a piece of %d operations from a stock of %d (+%d, -%d)",
				op.in, op.call, op.ret, len(p.ops), p.from.c, p.from.b, p.from.m)
			return
		}
	}
}

// bits packs done into a string, a bit an operation.
func bits(done []bool) string {
	b := make([]byte, (len(done)+7)/8)
	for i, d := range done {
		if d {
			b[i/8] |= 1 << (i % 8)
		}
	}
	return string(b)
}
