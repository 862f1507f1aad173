package bench

import (
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// Linearizability of an activity's stock. The other checks count: no more units held than the
// stock, none left unsold. This one orders: is there one sequence of the activity's stock
// operations, each placed between its send and its answer, in which every answer is what a
// single counter would have said at that point? A grab answered 202 must have found a unit; a
// grab answered 410 SOLD_OUT must have found none, at some instant while it was in flight. A
// node answering sold out from a stale flag after the operator's added stock was answered, a
// unit handed out twice in one instant, a 202 after the last unit went: each leaves no such
// sequence. Porcupine (github.com/anishathalye/porcupine) searches for it.
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
//     cancel, or from the payment window's close after the grab (less the clock skew the
//     deployment bears), on: b + 1. A cancel gives it back before answering unless the gate is
//     down, when the restock is owed and given later, at a moment no client sees.
//
// The uncertain effects stay uncertain (nothing resolves them), so each only loosens a bound
// from the earliest moment it may happen on: they are checked there, as instants. The price: a
// unit given back never raises the lower bound, so a sold out answered while such a unit was
// surely back (a stale sold-out flag after a cancel) is not caught; after added stock it is.
//
// The state after a set of operations does not depend on their order, so wherever no operation
// is in flight the state is known, and the history is checked piece by piece between such
// moments, each piece from the state the ones before it leave. A piece is searched by Porcupine,
// exponential in the grabs in flight at once in the worst case: a check that does not finish
// within its budget says unknown, not ok.
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

// stockModel is the counter, from init.
func stockModel(init stock) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return init },
		Step: func(state, input, _ any) (bool, any) {
			ok, next := state.(stock).step(input.(stockInput))
			return ok, next
		},
		Hash: func(state any) uint64 {
			s := state.(stock)
			return uint64(s.c)*1_000_003 ^ uint64(s.b)<<40 ^ uint64(s.m)<<20
		},
		DescribeOperation: func(input, _ any) string { return input.(stockInput).String() },
		DescribeState:     func(state any) string { s := state.(stock); return fmt.Sprintf("%d (+%d, -%d)", s.c, s.b, s.m) },
	}
}

// stockOps turns one activity's records into its stock operations.
func stockOps(records []Record, f StockFacts) []porcupine.Operation {
	var ops []porcupine.Operation
	add := func(call, ret int64, in stockInput) {
		ops = append(ops, porcupine.Operation{ClientId: len(ops), Input: in, Call: call, Return: max(ret, call)})
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
	skew := MaxClockSkew.Microseconds()
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
		from := at + f.PayWindow.Microseconds() - skew // its window closed, on a clock up to skew ahead
		if c, ok := cancelled[tok]; ok {
			from = min(from, c)
		}
		add(from, from, stockInput{op: opMaybeAdd, n: 1, what: "back " + tok})
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	for i := range ops {
		ops[i].ClientId = i
	}
	return ops
}

// CheckStock checks one activity's stock for linearizability (see Linearity) over its records,
// within budget.
func CheckStock(records []Record, f StockFacts, budget time.Duration) (l Linearity) {
	ops := stockOps(records, f)
	began := time.Now()
	l = Linearity{Ops: len(ops), Result: LinearOK}
	defer func() { l.Seconds = time.Since(began).Seconds() }()
	state := stock{c: f.Initial}
	for lo := 0; lo < len(ops); {
		// The piece: until a moment no operation is in flight.
		hi, until := lo+1, ops[lo].Return
		for hi < len(ops) && ops[hi].Call <= until {
			until = max(until, ops[hi].Return)
			hi++
		}
		piece := ops[lo:hi]
		res, info := porcupine.CheckOperationsVerbose(stockModel(state), piece, max(budget-time.Since(began), time.Millisecond))
		switch res {
		case porcupine.Illegal:
			l.Result, l.Stuck = LinearIllegal, stuck(piece, info, state)
			return l
		case porcupine.Unknown:
			l.Result = LinearUnknown
			return l
		}
		for _, op := range piece {
			_, state = state.step(op.Input.(stockInput))
		}
		lo = hi
	}
	return l
}

// stuck names the first operation of an illegal piece, by its send, that the longest order the
// search found leaves out.
func stuck(piece []porcupine.Operation, info porcupine.LinearizationInfo, from stock) string {
	var longest []int
	for _, part := range info.PartialLinearizations() {
		for _, l := range part {
			if len(l) > len(longest) {
				longest = l
			}
		}
	}
	placed := make(map[int]bool, len(longest))
	for _, i := range longest {
		placed[i] = true
	}
	for i, op := range piece {
		if !placed[i] {
			return fmt.Sprintf("%s, sent at %d µs and answered at %d µs, in a piece of %d operations from a stock of %d (+%d, -%d)",
				op.Input.(stockInput), op.Call, op.Return, len(piece), from.c, from.b, from.m)
		}
	}
	return ""
}
