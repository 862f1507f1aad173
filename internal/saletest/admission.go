package saletest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"seckill/internal/sale"
)

// AdmissionTests checks the queue and lottery modes through the service, on a wiring whose
// service has a line: who wins, in which order, and that everyone is answered.
func AdmissionTests(t *testing.T, newEnv NewEnv) {
	t.Run("QueueIsFIFOAfterTheDraw", func(t *testing.T) { queueFIFO(t, newEnv) })
	t.Run("LotteryWinnersAreTheDraws", func(t *testing.T) { lotteryWinners(t, newEnv) })
	t.Run("WinsOfAnUnrecordedRoundStand", func(t *testing.T) { queueRecordLost(t, newEnv) })
	t.Run("StockAddedWhileARoundIsAskedAgainGoesToTheHead", func(t *testing.T) { queueRestockedWhileAskedAgain(t, newEnv) })
	t.Run("WinsOfAPartlyFailedRoundStand", func(t *testing.T) { queuePartlyFailed(t, newEnv) })
	t.Run("AClickSentAgainIsAnsweredItsTicket", func(t *testing.T) { queueKeyed(t, newEnv) })
}

// queuePartlyFailed: some grabs of a drainer's batch fail (a link reset mid-batch) and the rest
// win, so the round fails; the next rounds, smaller since the gate holds less, ask the batch's
// tickets again and reach the end of the stock before its end. The tickets behind, whose grabs
// won in the failed round, must still be answered won: the first ticket to lose, asked in order,
// proves the rest lost, not the gate's running out. (The nemesis's Cluster seed 186: the drainer
// answered the line sold out with two of its winners in it, after a reset of every Redis link.)
// queueKeyed: a click on a queue activity sent again with its Idempotency-Key (its answer was
// lost) is answered the ticket the first one took, as the line has answered it: while it waits,
// once it won and the activity sold out, after the end; neither the pass the first one spent nor
// the challenge refuses it. A click with a new key is refused as any join is.
func queueKeyed(t *testing.T, newEnv NewEnv) {
	ctx := context.Background()
	env := newEnv(t, NewClock(T0.Add(-time.Hour)))
	svc := env.Service
	now := env.Clock.Now()
	a, err := svc.CreateActivity(ctx, sale.Activity{Name: "keyed", Kind: sale.KindItem, Stock: 1, PriceCents: 100,
		StartAt: now.Add(time.Minute), EndAt: now.Add(time.Hour), PayWindow: time.Hour, Admission: sale.AdmitQueue,
		RequireChallenge: true})
	if err != nil {
		t.Fatal(err)
	}
	env.Clock.Advance(time.Minute + time.Second)
	passOf := func(user string) string {
		t.Helper()
		c, err := env.Challenges.Challenge(ctx, a.ID, user)
		if err != nil {
			t.Fatal(err)
		}
		p, err := env.Challenges.Answer(ctx, a.ID, user, c.ID, env.Answers.Of(t, c.ID), nil)
		if err != nil {
			t.Fatal(err)
		}
		return p.Token
	}
	enter := func(user, key, pass string) (sale.Entry, error) {
		return svc.Enter(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: user, IdempotencyKey: key, Pass: pass})
	}
	again := func(first sale.TicketView, key, pass string, outcome sale.Outcome) sale.TicketView {
		t.Helper()
		e, err := enter(first.UserID, key, pass)
		if err != nil || !e.Lined || !e.Fresh || e.Ticket.Token != first.Token || e.Ticket.Outcome != outcome {
			t.Fatalf("%s's click again with key %s: %+v, %v; want ticket %s, fresh, %s", first.UserID, key, e, err, first.Token, outcome)
		}
		return e.Ticket
	}

	winPass, losePass := passOf("win"), passOf("lose")
	e, err := enter("win", "kw", winPass)
	if err != nil || !e.Fresh || e.Ticket.Outcome != sale.OutcomeWaiting {
		t.Fatalf("win's click: %+v, %v", e, err)
	}
	won := again(e.Ticket, "kw", winPass, sale.OutcomeWaiting)
	again(won, "kw", "", sale.OutcomeWaiting) // sent again without the pass: the key is enough
	e, err = enter("lose", "kl", losePass)
	if err != nil || !e.Fresh {
		t.Fatalf("lose's click: %+v, %v", e, err)
	}
	lost := e.Ticket
	if _, err := enter("lose", "kl2", losePass); !errors.Is(err, sale.ErrChallengeRequired) {
		t.Fatalf("lose's spent pass with a new key: %v, want ErrChallengeRequired", err)
	}

	drainAll(t, env, a)
	won = again(won, "kw", winPass, sale.OutcomeWon)
	again(won, "kw", "", sale.OutcomeWon)
	again(lost, "kl", losePass, sale.OutcomeSoldOut)
	if _, err := enter("late", "k-late", ""); !errors.Is(err, sale.ErrSoldOut) {
		t.Fatalf("a new click after the sell-out: %v, want ErrSoldOut", err)
	}
	env.Drain(a.ID)
	if o, err := svc.Order(ctx, "win", won.OrderToken); err != nil || o.Status != sale.StatusCreated {
		t.Fatalf("the order of the ticket answered again: %+v, %v", o, err)
	}
	env.Clock.Advance(time.Hour)
	again(won, "kw", "", sale.OutcomeWon)
	if _, err := enter("lose", "kl3", ""); !errors.Is(err, sale.ErrEnded) {
		t.Fatalf("a new click after the end: %v, want ErrEnded", err)
	}
}

func queuePartlyFailed(t *testing.T, newEnv NewEnv) {
	ctx := context.Background()
	env := newEnv(t, NewClock(T0.Add(-time.Hour)))
	const stock = 10
	a := lineActivity(t, env, stock, sale.AdmitQueue)
	env.Clock.Advance(time.Minute) // the start: the joins after it take their places in turn
	var tokens []string
	owner := map[string]string{}
	for i := range 2 * stock {
		v, _, err := env.Lines.Join(ctx, a.ID, fmt.Sprintf("p%d", i), "", "")
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, v.Token)
		owner[v.Token] = v.UserID
	}
	// The first round's batch is the whole stock; the grabs of its third and sixth tickets fail.
	env.Faults.FailGrabsOf(owner[tokens[2]], owner[tokens[5]])
	d := env.Lines.NewDrainer("test", 100*time.Millisecond)
	env.Clock.Advance(100 * time.Millisecond)
	if _, err := d.Round(ctx, a); err == nil {
		t.Fatal("a round two of whose grabs failed: no error")
	}
	if rem, err := env.Service.Remaining(ctx, a.ID); err != nil || rem != 2 {
		t.Fatalf("after the round the gate holds %d (%v), want 2: eight of its grabs won", rem, err)
	}
	drainWith(t, env, d, a)
	for i, tok := range tokens {
		v, err := env.Lines.Ticket(ctx, owner[tok], tok)
		want := sale.OutcomeSoldOut
		if i < stock {
			want = sale.OutcomeWon
		}
		if err != nil || v.Outcome != want || (want == sale.OutcomeWon) != (v.OrderToken != "") {
			t.Errorf("ticket %d is %s (order %q, %v), want %s", i, v.Outcome, v.OrderToken, err, want)
		}
	}
}

// queueRecordLost: a drainer grabs a unit for each ticket at the head and loses the record of
// their outcomes (it dies, or the line's server goes, in between), and the gate has nothing left.
// Neither that drainer nor the next one (a restarted process, another node) may answer those
// tickets sold out: their grabs won, and their keys return the wins. (The nemesis's Sentinel seed
// 22: the next drainer found the head where it was and the gate empty, and answered the whole
// line sold out, its 40 winners included.)
func queueRecordLost(t *testing.T, newEnv NewEnv) {
	ctx := context.Background()
	env := newEnv(t, NewClock(T0.Add(-time.Hour)))
	for _, restarted := range []bool{false, true} {
		a := lineActivity(t, env, 3, sale.AdmitQueue)
		tokens, owner, d := roundRecordLost(t, env, a, 6, fmt.Sprintf("r%v-", restarted))
		if rem, err := env.Service.Remaining(ctx, a.ID); err != nil || rem != 0 {
			t.Fatalf("after the unrecorded round the gate holds %d (%v), want 0: its grabs took every unit", rem, err)
		}
		if restarted {
			d = env.Lines.NewDrainer("test", 100*time.Millisecond)
		}
		drainWith(t, env, d, a)
		for i, tok := range tokens {
			v, err := env.Lines.Ticket(ctx, owner[tok], tok)
			want := sale.OutcomeSoldOut
			if i < 3 {
				want = sale.OutcomeWon
			}
			if err != nil || v.Outcome != want || (want == sale.OutcomeWon) != (v.OrderToken != "") {
				t.Errorf("restarted %v: ticket %d is %s (order %q, %v), want %s", restarted, i, v.Outcome, v.OrderToken, err, want)
			}
		}
	}
}

// queueRestockedWhileAskedAgain: a drainer asks the gate again for a batch whose record was
// lost (the gate has nothing left) and the operator adds stock between its reading of the gate
// and its grabs. The added units go to the first tickets still waiting, in place order: a batch
// asked all at once would hand them to whichever grabs reached the gate first.
func queueRestockedWhileAskedAgain(t *testing.T, newEnv NewEnv) {
	ctx := context.Background()
	env := newEnv(t, NewClock(T0.Add(-time.Hour)))
	a := lineActivity(t, env, 3, sale.AdmitQueue)
	tokens, owner, d := roundRecordLost(t, env, a, 30, "u") // the line's cap, 10 times the stock
	const added = 5
	env.Faults.AfterNext(func() {
		if _, err := env.Operator.AddStock(ctx, a.ID, added); err != nil {
			t.Errorf("AddStock: %v", err)
		}
	})
	drainWith(t, env, d, a)
	for i, tok := range tokens {
		v, err := env.Lines.Ticket(ctx, owner[tok], tok)
		want := sale.OutcomeSoldOut
		if i < 3+added {
			want = sale.OutcomeWon
		}
		if err != nil || v.Outcome != want {
			t.Errorf("ticket %d is %s (%v), want %s: the added units go to the head", i, v.Outcome, err, want)
		}
	}
}

// roundRecordLost starts a's sale, queues n users (named prefix and their number) and runs a
// drainer's round whose record of outcomes is lost: its grabs took the units, its tickets still
// wait. It returns the tickets' tokens in place order, their owners, and that drainer.
func roundRecordLost(t *testing.T, env Env, a sale.Activity, n int, prefix string) ([]string, map[string]string, *sale.Drainer) {
	t.Helper()
	ctx := context.Background()
	env.Clock.Advance(time.Minute) // the start: the joins after it take their places in turn
	var tokens []string
	owner := map[string]string{}
	for i := range n {
		v, _, err := env.Lines.Join(ctx, a.ID, fmt.Sprintf("%s%d", prefix, i), "", "")
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, v.Token)
		owner[v.Token] = v.UserID
	}
	env.Faults.LoseAdmissionRecords(1)
	d := env.Lines.NewDrainer("test", 100*time.Millisecond)
	env.Clock.Advance(100 * time.Millisecond)
	if _, err := d.Round(ctx, a); err == nil {
		t.Fatal("a round whose record was lost: no error")
	}
	return tokens, owner, d
}

// lineActivity creates an activity of stock units under admission, starting a minute after the
// clock.
func lineActivity(t *testing.T, env Env, stock int64, admission sale.Admission) sale.Activity {
	t.Helper()
	now := env.Clock.Now()
	a, err := env.Service.CreateActivity(context.Background(), sale.Activity{Name: string(admission), Kind: sale.KindItem,
		Stock: stock, PriceCents: 100, StartAt: now.Add(time.Minute), EndAt: now.Add(time.Hour),
		PayWindow: time.Hour, Admission: admission})
	if err != nil {
		t.Fatal(err)
	}
	if a.QueueCap != 10*stock || a.AdmitRate != sale.DefaultAdmitRate || a.Seed == (sale.Seed{}) {
		t.Fatalf("created %+v: want the default cap and rate and a seed", a)
	}
	return a
}

// drainAll runs a drainer a round every 100 ms of the test's clock until nobody waits.
func drainAll(t *testing.T, env Env, a sale.Activity) {
	t.Helper()
	drainWith(t, env, env.Lines.NewDrainer("test", 100*time.Millisecond), a)
}

// drainWith runs d a round every 100 ms of the test's clock until nobody waits.
func drainWith(t *testing.T, env Env, d *sale.Drainer, a sale.Activity) {
	t.Helper()
	for round := 0; ; round++ {
		env.Clock.Advance(100 * time.Millisecond)
		if _, err := d.Round(context.Background(), a); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		st, err := env.Service.Stats(context.Background(), a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.Line.Waiting == 0 {
			return
		}
		if round == 1000 {
			t.Fatalf("still %d waiting after %d rounds", st.Line.Waiting, round)
		}
	}
}

func queueFIFO(t *testing.T, newEnv NewEnv) {
	ctx := context.Background()
	env := newEnv(t, NewClock(T0.Add(-time.Hour)))
	svc := env.Service
	a := lineActivity(t, env, 20, sale.AdmitQueue)
	if _, err := svc.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: "direct"}); !errors.Is(err, sale.ErrInvalid) {
		t.Fatalf("a direct grab of a queue activity: %v, want ErrInvalid", err)
	}
	var early, late []string
	owner := map[string]string{}
	for i := range 40 {
		v, fresh, err := env.Lines.Join(ctx, a.ID, fmt.Sprintf("e%d", i), "", "")
		if err != nil || !fresh || v.Outcome != sale.OutcomeWaiting || v.Position != 0 || !v.Early {
			t.Fatalf("early join %d: %+v fresh=%v, %v", i, v, fresh, err)
		}
		if v.Wait < a.StartAt.Sub(env.Clock.Now()) {
			t.Fatalf("early ticket's wait %v: want at least the time to the start", v.Wait)
		}
		early = append(early, v.Token)
		owner[v.Token] = v.UserID
		env.Clock.Advance(time.Second / 4)
	}
	if v, fresh, err := env.Lines.Join(ctx, a.ID, "e7", "", ""); err != nil || fresh || v.Token != early[7] {
		t.Fatalf("e7 again: %+v fresh=%v %v, want its ticket back", v, fresh, err)
	}
	env.Clock.Advance(time.Minute)
	for i := range 30 {
		v, fresh, err := env.Lines.Join(ctx, a.ID, fmt.Sprintf("l%d", i), "", "")
		if err != nil || !fresh || v.Early || v.Position != int64(41+i) {
			t.Fatalf("late join %d: %+v fresh=%v, %v, want position %d", i, v, fresh, err, 41+i)
		}
		late = append(late, v.Token)
		owner[v.Token] = v.UserID
	}
	if _, err := env.Lines.Ticket(ctx, "l0", early[0]); !errors.Is(err, sale.ErrNotFound) {
		t.Fatalf("another user's ticket: %v, want ErrNotFound", err)
	}
	drainAll(t, env, a)

	order := append(sale.DrawOrder(a.Seed, early), late...)
	won := 0
	for place, tok := range order {
		v, err := env.Lines.Ticket(ctx, owner[tok], tok)
		if err != nil {
			t.Fatal(err)
		}
		want := sale.OutcomeSoldOut
		if place < 20 {
			want = sale.OutcomeWon
		}
		if v.Outcome != want || v.Place != int64(place) {
			t.Fatalf("place %d (%s): outcome %s at place %d, want %s: the first 20 in the line win", place, tok, v.Outcome, v.Place, want)
		}
		if want == sale.OutcomeWon {
			won++
			env.Drain(a.ID)
			o, err := svc.Order(ctx, owner[tok], v.OrderToken)
			if err != nil || o.Status != sale.StatusCreated || o.UserID != owner[tok] {
				t.Fatalf("order of the winner at place %d: %+v, %v", place, o, err)
			}
		}
	}
	st, err := svc.Stats(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if won != 20 || st.Orders != 20 || st.Remaining != 0 || st.Line.Joined != 70 || st.Line.Answered != 70 {
		t.Fatalf("won %d, stats %+v line %+v", won, st, st.Line)
	}
	if _, _, err := env.Lines.Join(ctx, a.ID, "after", "", ""); !errors.Is(err, sale.ErrSoldOut) {
		t.Fatalf("join after the sell-out: %v, want ErrSoldOut", err)
	}
}

func lotteryWinners(t *testing.T, newEnv NewEnv) {
	ctx := context.Background()
	env := newEnv(t, NewClock(T0.Add(-time.Hour)))
	svc := env.Service
	a := lineActivity(t, env, 10, sale.AdmitLottery)
	owner := map[string]string{}
	var entries []string
	for i := range 35 {
		v, _, err := env.Lines.Join(ctx, a.ID, fmt.Sprintf("u%d", i), "", "")
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, v.Token)
		owner[v.Token] = v.UserID
	}
	if _, err := env.Lines.Entries(ctx, a); !errors.Is(err, sale.ErrNotStarted) {
		t.Fatalf("entries before the draw: %v, want ErrNotStarted", err)
	}
	env.Clock.Advance(time.Minute)
	if _, _, err := env.Lines.Join(ctx, a.ID, "late", "", ""); !errors.Is(err, sale.ErrEnded) {
		t.Fatalf("an entry after the start: %v, want ErrEnded", err)
	}
	drainAll(t, env, a)

	published, err := env.Lines.Entries(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(published, slices.Sorted(slices.Values(entries))) {
		t.Fatalf("published entries %v, want the %d tokens sorted", published, len(entries))
	}
	winners := sale.Winners(a.Seed, published, int(a.Stock))
	for _, tok := range entries {
		v, err := env.Lines.Ticket(ctx, owner[tok], tok)
		if err != nil {
			t.Fatal(err)
		}
		want := sale.OutcomeNotDrawn
		if slices.Contains(winners, tok) {
			want = sale.OutcomeWon
		}
		if v.Outcome != want {
			t.Fatalf("ticket %s: %s, want %s as the draw recomputed from the seed says", tok, v.Outcome, want)
		}
	}
	env.Drain(a.ID)
	if st, err := svc.Stats(ctx, a.ID); err != nil || st.Orders != a.Stock {
		t.Fatalf("stats %+v, %v: want an order per unit", st, err)
	}
}
