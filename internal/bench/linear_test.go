package bench

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"seckill/internal/sale"
)

// grabRec is a grab of user, sent at start and answered at end (ms) with outcome.
func grabRec(user string, start, end int64, outcome Outcome) Record {
	r := Record{User: user, Key: "k-" + user, Start: start * 1000, End: end * 1000, Outcome: outcome}
	switch outcome {
	case Won:
		r.Status, r.Token = http.StatusAccepted, "t-"+user
	case SoldOut:
		r.Status = http.StatusGone
	case Error:
		r.Status = http.StatusServiceUnavailable
	}
	return r
}

func TestCheckStock(t *testing.T) {
	back := map[string]Order{"t-a": {Found: true, Status: sale.StatusCancelled}}
	cases := []struct {
		name    string
		stock   int64
		orders  map[string]Order
		records []Record
		want    string
	}{
		{"the last unit, then sold out", 1, nil, []Record{grabRec("a", 0, 10, Won), grabRec("b", 20, 30, SoldOut)}, LinearOK},
		{"sold out in flight with the last unit's grab", 1, nil, []Record{grabRec("a", 0, 30, Won), grabRec("b", 10, 20, SoldOut)}, LinearOK},
		{"sold out before the last unit went", 1, nil, []Record{grabRec("b", 0, 10, SoldOut), grabRec("a", 20, 30, Won)}, LinearIllegal},
		{"sold out while a unit is left", 2, nil, []Record{grabRec("a", 0, 10, Won), grabRec("b", 20, 30, SoldOut)}, LinearIllegal},
		{"two units of one", 1, nil, []Record{grabRec("a", 0, 10, Won), grabRec("b", 20, 30, Won)}, LinearIllegal},
		{"two units of one, at once", 1, nil, []Record{grabRec("a", 0, 30, Won), grabRec("b", 10, 20, Won)}, LinearIllegal},
		{"an unanswered grab may explain a sold out", 2, nil, []Record{grabRec("a", 0, 10, Won), grabRec("c", 5, 6, Error),
			grabRec("b", 20, 30, SoldOut)}, LinearOK},
		{"a repeat's sold out may be its first send's", 1, nil, []Record{grabRec("b", 0, 5, Error), grabRec("a", 10, 20, Won),
			{User: "b", Key: "k-b", Start: 30_000, End: 40_000, Outcome: SoldOut, Status: http.StatusGone}}, LinearOK},
		{"stock added after a sold out", 1, nil, []Record{grabRec("a", 0, 10, Won), grabRec("b", 20, 30, SoldOut),
			{Op: OpChange, Detail: "add 1", Start: 40_000, End: 50_000, Status: http.StatusOK}, grabRec("c", 60, 70, Won)}, LinearOK},
		{"sold out after the added stock was answered", 1, nil, []Record{grabRec("a", 0, 10, Won),
			{Op: OpChange, Detail: "add 1", Start: 40_000, End: 50_000, Status: http.StatusOK}, grabRec("c", 60, 70, SoldOut)}, LinearIllegal},
		{"an unanswered add may not have been made", 1, nil, []Record{grabRec("a", 0, 10, Won),
			{Op: OpChange, Detail: "add 1", Start: 40_000, End: 50_000, Status: http.StatusBadGateway}, grabRec("c", 60, 70, SoldOut)}, LinearOK},
		{"an add the gate has not taken yet (202) may not be on sale", 1, nil, []Record{grabRec("a", 0, 10, Won),
			{Op: OpChange, Detail: "add 1", Start: 40_000, End: 50_000, Status: http.StatusAccepted}, grabRec("c", 60, 70, SoldOut),
			grabRec("d", 80, 90, Won)}, LinearOK},
		{"a pending add sold twice", 1, nil, []Record{grabRec("a", 0, 10, Won),
			{Op: OpChange, Detail: "add 1", Start: 40_000, End: 50_000, Status: http.StatusAccepted}, grabRec("c", 60, 70, Won),
			grabRec("d", 80, 90, Won)}, LinearIllegal},
		{"a cancelled unit sold again", 1, back, []Record{grabRec("a", 0, 10, Won), grabRec("b", 20, 30, SoldOut),
			{Op: OpCancel, Token: "t-a", Start: 40_000, End: 50_000, Status: http.StatusOK}, grabRec("c", 60, 70, Won)}, LinearOK},
		{"a unit sold again before its order was cancelled", 1, back, []Record{grabRec("a", 0, 10, Won),
			grabRec("c", 20, 30, Won), {Op: OpCancel, Token: "t-a", Start: 40_000, End: 50_000, Status: http.StatusOK}}, LinearIllegal},
		{"an expired unit sold again after the window", 1, back, []Record{grabRec("a", 0, 10, Won), grabRec("c", 12_000, 12_010, Won)}, LinearOK},
		{"an expired unit sold again within the window", 1, back, []Record{grabRec("a", 0, 10, Won), grabRec("c", 5_000, 5_010, Won)}, LinearIllegal},
		// The window opens on the answering node's clock and closes on the sweeper's: with one
		// behind and the other ahead, each within the promise, up to 2 s early (Sentinel seed 205).
		{"an expired unit sold again 1.5 s early, two clocks off", 1, back, []Record{grabRec("a", 0, 10, Won),
			grabRec("c", 8_500, 8_510, Won)}, LinearOK},
		{"an expired unit sold again 2.5 s early", 1, back, []Record{grabRec("a", 0, 10, Won),
			grabRec("c", 7_500, 7_510, Won)}, LinearIllegal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := CheckStock(c.records, StockFacts{Initial: c.stock, PayWindow: 10 * time.Second, Orders: c.orders}, 10*time.Second)
			if got.Result != c.want {
				t.Fatalf("%+v, want %s", got, c.want)
			}
			if got.Result == LinearIllegal && got.Stuck == "" {
				t.Errorf("an illegal history names no operation: %+v", got)
			}
		})
	}
}

// TestCheckStockOfACrowd checks a crowd's correct history, made by a counter behind a lock, at
// the size and pace of a nemesis run's scarce activity, and the same history with one answer
// made stale.
func TestCheckStockOfACrowd(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	const stock, clicks = 80, 6000
	left := int64(stock)
	var records []Record
	orders := map[string]Order{}
	var at int64
	for i := range clicks {
		at += r.Int64N(80_000) // µs between sends: ~25 a second, an activity's share of a nemesis crowd
		lat := 1_000 + r.Int64N(30_000)
		if r.IntN(100) == 0 {
			lat = r.Int64N(2_000_000) // a node struck, a failover: answers up to 2 s late
		}
		user := fmt.Sprintf("u%d", i)
		rec := Record{User: user, Key: "k" + user, Start: at, End: at + lat}
		switch {
		case r.IntN(50) == 0:
			rec.Outcome, rec.Status = Error, http.StatusServiceUnavailable // taken or not, unseen
			if left > 0 && r.IntN(2) == 0 {
				left--
			}
		case left > 0:
			left--
			rec.Outcome, rec.Status, rec.Token = Won, http.StatusAccepted, "t"+user
			if r.IntN(4) == 0 { // cancelled later: the unit is back by the cancel's answer
				orders[rec.Token] = Order{Found: true, Status: sale.StatusCancelled}
				records = append(records, Record{Op: OpCancel, Token: rec.Token, Start: at + lat + 1000, End: at + lat + 2000, Status: http.StatusOK})
				left++
				at += 2000
			}
		default:
			rec.Outcome, rec.Status = SoldOut, http.StatusGone
		}
		records = append(records, rec)
	}
	f := StockFacts{Initial: stock, PayWindow: time.Hour, Orders: orders}
	got := CheckStock(records, f, LinearBudget)
	t.Logf("%d operations checked in %.3f s", got.Ops, got.Seconds)
	if got.Result != LinearOK {
		t.Fatalf("a correct crowd's history: %+v", got)
	}
	// Grabs answered 202 while no unit was left, more than the unanswered grabs could have
	// left (each of those may not have taken its unit): the history has no order.
	unanswered := 0
	for _, rec := range records {
		if rec.Outcome == Error {
			unanswered++
		}
	}
	over := slices.Clone(records)
	for i, n := len(over)-1, 0; i >= 0 && n <= unanswered; i-- {
		if over[i].Outcome == SoldOut {
			over[i].Outcome, over[i].Status, over[i].Token = Won, http.StatusAccepted, fmt.Sprintf("stale%d", n)
			n++
		}
	}
	if got := CheckStock(over, f, LinearBudget); got.Result != LinearIllegal || !strings.HasPrefix(got.Stuck, "take") {
		t.Errorf("units handed out of none: %+v, want illegal", got)
	}
	// A grab answered 410 while the units were plenty.
	early := slices.Clone(records)
	i := len(early) / 100
	for early[i].Outcome != Won {
		i++
	}
	early[i].Outcome, early[i].Status, early[i].Token = SoldOut, http.StatusGone, ""
	if got := CheckStock(early, f, LinearBudget); got.Result != LinearIllegal || !strings.HasPrefix(got.Stuck, "none") {
		t.Errorf("a sold out among plenty: %+v, want illegal", got)
	}
}

// stockModel is the stock's model (stock.step) as Porcupine's, from init.
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
	}
}

// TestCheckStockAgreesWithPorcupine draws small histories of every kind of stock operation, on
// few moments so that they overlap and tie, and checks that the search's verdict is Porcupine's,
// whose search tries every order.
func TestCheckStockAgreesWithPorcupine(t *testing.T) {
	r := rand.New(rand.NewPCG(39, 1))
	kinds := [...]stockOp{opTake, opTake, opTake, opEmpty, opEmpty, opEmpty, opAdd, opMaybeTake, opMaybeAdd}
	verdicts := map[bool]int{}
	for trial := range 30_000 {
		ops := make([]timedOp, 1+r.IntN(10))
		for i := range ops {
			in := stockInput{op: kinds[r.IntN(len(kinds))], what: fmt.Sprint(i)}
			if in.op == opAdd || in.op == opMaybeAdd {
				in.n = 1 + r.Int64N(2)
			}
			call := r.Int64N(12)
			ret := call + r.Int64N(8)
			if in.op == opMaybeTake || in.op == opMaybeAdd {
				ret = call // an instant, as stockOps makes them
			}
			ops[i] = timedOp{in: in, call: call, ret: ret}
		}
		slices.SortStableFunc(ops, func(a, b timedOp) int { return cmp.Compare(a.call, b.call) })
		initial := r.Int64N(3)
		got := checkOps(ops, initial, time.Minute)
		history := make([]porcupine.Operation, len(ops))
		for i, op := range ops {
			history[i] = porcupine.Operation{ClientId: i, Input: op.in, Call: op.call, Return: op.ret}
		}
		want := porcupine.CheckOperations(stockModel(stock{c: initial}), history)
		if got.Result == LinearUnknown || (got.Result == LinearOK) != want {
			t.Fatalf("trial %d, a stock of %d, %v: %+v, Porcupine says linearizable %v", trial, initial, ops, got, want)
		}
		if got.Result == LinearIllegal && got.Stuck == "" {
			t.Fatalf("trial %d: an illegal history names no operation: %v", trial, ops)
		}
		verdicts[want]++
	}
	t.Logf("linearizable %d, not %d", verdicts[true], verdicts[false])
	if verdicts[true] < 5_000 || verdicts[false] < 5_000 {
		t.Fatalf("the draws are lopsided, a verdict seldom checked: %v", verdicts)
	}
}

// The stall of stallHistory, in µs from the first send.
const stallFrom, stallTo = 1_000_000, 3_000_000

// inStall reports whether rec, a grab, was sent during the stall.
func inStall(rec Record) bool { return rec.Op == "" && rec.Start >= stallFrom && rec.Start < stallTo }

// stallHistory is a crowd's correct history (a counter behind a lock, each grab taking effect
// at a random moment of its span) across a 2 s stall: the grabs sent during it are answered at
// its end, about 400 in flight at once around the last units, as a failover holds them; owners
// cancel some orders, and some grabs go unanswered.
func stallHistory() ([]Record, StockFacts) {
	r := rand.New(rand.NewPCG(2, 39))
	const stock, clicks, every = 300, 800, 5_000 // µs between sends
	type effect struct {
		at   int64
		rec  int  // the grab's record, or -1 for a unit back
		lost bool // unanswered
	}
	var records []Record
	var effects []effect
	for i := range clicks {
		at := int64(i) * every
		end := at + 1_000 + r.Int64N(30_000)
		if at >= stallFrom && at < stallTo {
			end = stallTo + r.Int64N(50_000)
		}
		user := fmt.Sprintf("u%d", i)
		records = append(records, Record{User: user, Key: "k" + user, Start: at, End: end})
		effects = append(effects, effect{at: at + r.Int64N(end-at+1), rec: len(records) - 1, lost: r.IntN(40) == 0})
	}
	slices.SortFunc(effects, func(a, b effect) int { return cmp.Compare(a.at, b.at) })
	orders := map[string]Order{}
	left := int64(stock)
	for i := 0; i < len(effects); i++ {
		e := effects[i]
		if e.rec < 0 {
			left++
			continue
		}
		rec := &records[e.rec]
		switch {
		case e.lost:
			rec.Outcome, rec.Status = Error, http.StatusServiceUnavailable
			if left > 0 {
				left--
			}
		case left > 0:
			left--
			rec.Outcome, rec.Status, rec.Token = Won, http.StatusAccepted, "t"+rec.User
			if r.IntN(10) == 0 { // cancelled: the unit is back within the cancel's call
				c := Record{Op: OpCancel, Token: rec.Token, Start: rec.End + 10_000, End: rec.End + 20_000, Status: http.StatusOK}
				orders[rec.Token] = Order{Found: true, Status: sale.StatusCancelled}
				records = append(records, c)
				j, _ := slices.BinarySearchFunc(effects[i+1:], c.Start+5_000, func(e effect, at int64) int { return cmp.Compare(e.at, at) })
				effects = slices.Insert(effects, i+1+j, effect{at: c.Start + 5_000, rec: -1})
			}
		default:
			rec.Outcome, rec.Status = SoldOut, http.StatusGone
		}
	}
	return records, StockFacts{Initial: stock, PayWindow: time.Hour, Orders: orders}
}

// TestCheckStockOfAStall checks the stall's history, and the same history with more units handed
// out than the stock and every unit given back could supply.
func TestCheckStockOfAStall(t *testing.T) {
	records, f := stallHistory()
	var won, back, stalled int64
	for _, rec := range records {
		switch {
		case rec.Outcome == Won:
			won++
		case rec.Op == OpCancel:
			back++
		}
		if inStall(rec) {
			stalled++
		}
	}
	got := CheckStock(records, f, LinearBudget)
	t.Logf("%d operations (%d grabs in the stall, %d won, %d given back) checked in %.3f s", got.Ops, stalled, won, back, got.Seconds)
	if got.Result != LinearOK {
		t.Fatalf("a correct history across a stall: %+v", got)
	}
	over := slices.Clone(records)
	for i := range over {
		if won > f.Initial+back {
			break
		}
		if over[i].Outcome == SoldOut && inStall(over[i]) {
			over[i].Outcome, over[i].Status, over[i].Token = Won, http.StatusAccepted, fmt.Sprintf("stale%d", i)
			won++
		}
	}
	if got := CheckStock(over, f, LinearBudget); got.Result != LinearIllegal || !strings.HasPrefix(got.Stuck, "take") {
		t.Errorf("%d units handed out of %d and %d back: %+v, want illegal", won, f.Initial, back, got)
	}
}

// BenchmarkCheckStockOfAStall measures the check of the stall's history (TestCheckStockOfAStall).
func BenchmarkCheckStockOfAStall(b *testing.B) {
	records, f := stallHistory()
	for b.Loop() {
		if got := CheckStock(records, f, LinearBudget); got.Result != LinearOK {
			b.Fatalf("%+v", got)
		}
	}
}
