package saletest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/sale"
)

// LineItem is a queue activity of stock units starting at 12:00 on 2001-11-30, with a fixed seed.
func LineItem(id string, stock int64, admission sale.Admission) sale.Activity {
	a := GateItem(id, stock, 1)
	a.Admission, a.QueueCap, a.AdmitRate = admission, 10*stock, 1000
	for i := range a.Seed {
		a.Seed[i] = byte(i*7 + len(id))
	}
	return a
}

// NewLine returns a line that knows no activity yet, and a function that reopens it from what it
// made durable, as a restarted process would (the old one is no longer used). Activity ids are
// unique across the subtests.
type NewLine func(t *testing.T) (line sale.Line, reopen func() sale.Line)

// LineTests checks the rules every sale.Line keeps, whatever it runs on.
func LineTests(t *testing.T, newLine NewLine) {
	t.Run("EarlyCrowdDrawnAtTheSeal", func(t *testing.T) { lineEarlyCrowd(t, newLine) })
	t.Run("CapAndDuplicates", func(t *testing.T) { lineCap(t, newLine) })
	t.Run("LotteryTakesNoneAfterTheSeal", func(t *testing.T) { lineLotteryClosed(t, newLine) })
	t.Run("AdmitAndSkipMoveTheHeadOnce", func(t *testing.T) { lineAdmitSkip(t, newLine) })
	t.Run("ConcurrentJoinsGetDistinctPlaces", func(t *testing.T) { lineConcurrent(t, newLine) })
	t.Run("TheSealRacingEarlyJoins", func(t *testing.T) { lineSealRace(t, newLine) })
	t.Run("AnEndGivenToTheLineHolds", func(t *testing.T) { lineRevisedEnd(t, newLine) })
	t.Run("AJoinSentAgainWithItsKeyGetsItsTicket", func(t *testing.T) { lineKeyed(t, newLine) })
}

// lineKeyed: a join sent again with its idempotency key (its answer was lost) is answered the
// ticket the first took: while it waits, once it won, after the line was told the sale ended,
// after a restart, and when the crowd sends it at once; a lookup takes nothing; another key of
// the same user joins again once the ticket was answered.
func lineKeyed(t *testing.T, newLine NewLine) {
	ctx := context.Background()
	l, reopen := newLine(t)
	a := LineItem("line-keyed", 2, sale.AdmitQueue)
	a.Revision = 1
	before, at := a.StartAt.Add(-time.Second), a.StartAt.Add(time.Second)
	keyed := func(l sale.Line, user, key string, now time.Time, lookup bool) (sale.Joined, error) {
		return l.Join(ctx, sale.JoinRequest{Activity: a, UserID: user, Token: sale.NewTicketToken(a.ID), Key: key,
			Lookup: lookup, Now: now, Tail: true})
	}
	again := func(l sale.Line, first sale.Ticket, key string, now time.Time, lookup bool, outcome sale.Outcome) {
		t.Helper()
		j, err := keyed(l, first.UserID, key, now, lookup)
		if err != nil || !j.Fresh || j.Token != first.Token || j.UserID != first.UserID || j.Outcome != outcome {
			t.Fatalf("%s's join again with key %s (lookup %v): %+v, %v; want its ticket %s, fresh, outcome %q",
				first.UserID, key, lookup, j, err, first.Token, outcome)
		}
	}

	early, err := keyed(l, "ann", "k1", before, false)
	if err != nil || !early.Fresh || !early.Early {
		t.Fatalf("ann's keyed early join: %+v, %v", early, err)
	}
	again(l, early.Ticket, "k1", before, false, "")
	again(l, early.Ticket, "k1", before, true, "")
	// Another key while the ticket waits: the waiting ticket, not this key's (fresh false).
	if j, err := keyed(l, "ann", "k2", before, false); err != nil || j.Fresh || j.Token != early.Token {
		t.Fatalf("ann's join with another key while waiting: %+v, %v", j, err)
	}
	for _, lookup := range []struct{ user, key string }{{"ann", "k2"}, {"bob", "k1"}, {"ann", ""}} {
		if j, err := keyed(l, lookup.user, lookup.key, at, true); !errors.Is(err, sale.ErrNotFound) {
			t.Fatalf("lookup of %s's key %q, which took no ticket: %+v, %v, want ErrNotFound", lookup.user, lookup.key, j, err)
		}
	}
	if st, _ := l.State(ctx, a.ID); st.Joined != 1 {
		t.Fatalf("after the lookups the line has %+v, want the one ticket", st)
	}

	// The crowd: 8 users, each sending one keyed join 4 times at once, take 8 tickets.
	crowd := joinAtOnce(t, l, 32, func(i int) sale.JoinRequest {
		return sale.JoinRequest{Activity: a, UserID: fmt.Sprintf("c%d", i%8), Token: sale.NewTicketToken(a.ID),
			Key: fmt.Sprintf("ck%d", i%8), Now: at, Tail: true}
	})
	for i, tk := range crowd {
		if tk.Token != crowd[i%8].Token || tk.UserID != fmt.Sprintf("c%d", i%8) {
			t.Fatalf("join %d of the crowd: %+v, want the ticket of the user's first %+v", i, tk, crowd[i%8])
		}
	}
	st, err := l.State(ctx, a.ID)
	if err != nil || st.Joined != 9 {
		t.Fatalf("after the crowd: %+v, %v, want 9 tickets", st, err)
	}

	// Ann's ticket (place 0 after the draw, the only early one) wins.
	if _, err := l.Seal(ctx, a); err != nil {
		t.Fatal(err)
	}
	from, to, ts, err := l.Next(ctx, a.ID, 1)
	if err != nil || len(ts) != 1 || ts[0].Token != early.Token {
		t.Fatalf("Next(1) = %d, %d, %+v, %v; want ann's ticket", from, to, ts, err)
	}
	ts[0].Outcome, ts[0].OrderToken, ts[0].AmountCents = sale.OutcomeWon, "o-ann", 100
	if err := l.Admit(ctx, a.ID, from, to, ts, 0); err != nil {
		t.Fatal(err)
	}
	again(l, early.Ticket, "k1", at, false, sale.OutcomeWon)
	// Another key once the ticket was answered: a new ticket, which that key took.
	second, err := keyed(l, "ann", "k2", at, false)
	if err != nil || !second.Fresh || second.Token == early.Token || second.Place != 9 {
		t.Fatalf("ann's join with another key after her win: %+v, %v; want a new ticket at place 9", second, err)
	}
	ended := a
	ended.Revision, ended.EndAt = 2, at.Add(time.Second)
	if err := l.Revise(ctx, ended); err != nil {
		t.Fatal(err)
	}
	if j, err := keyed(l, "ann", "k3", ended.EndAt, false); !errors.Is(err, sale.ErrEnded) {
		t.Fatalf("ann's join with a new key after the end: %+v, %v, want ErrEnded", j, err)
	}
	for _, l := range []sale.Line{l, reopen()} {
		again(l, early.Ticket, "k1", ended.EndAt, false, sale.OutcomeWon)
		again(l, early.Ticket, "k1", ended.EndAt, true, sale.OutcomeWon)
		again(l, second.Ticket, "k2", ended.EndAt, true, "")
		again(l, crowd[3], "ck3", ended.EndAt, true, "")
	}
}

// lineRevisedEnd: the sale is ended by an operator (revision 2, its end now); a join made on a
// copy from before (revision 1, ending an hour later) is refused ENDED by the line itself, and a
// late revision 1 given after does not move the end back.
func lineRevisedEnd(t *testing.T, newLine NewLine) {
	ctx := context.Background()
	l, _ := newLine(t)
	a := LineItem("line-revised", 3, sale.AdmitQueue)
	a.Revision = 1
	join(t, l, a, "before", a.StartAt.Add(time.Second), true)
	ended := a
	ended.Revision, ended.EndAt = 2, a.StartAt.Add(time.Minute)
	if err := l.Revise(ctx, ended); err != nil {
		t.Fatal(err)
	}
	if err := l.Revise(ctx, a); err != nil { // revision 1 again, given late
		t.Fatal(err)
	}
	for _, user := range []string{"after", "before"} {
		_, err := l.Join(ctx, sale.JoinRequest{Activity: a, UserID: user, Token: sale.NewTicketToken(a.ID), Now: ended.EndAt, Tail: true})
		if !errors.Is(err, sale.ErrEnded) {
			t.Fatalf("%s joins at the end on a copy from before it: %v, want ErrEnded", user, err)
		}
	}
	if _, fresh := join(t, l, a, "just-before", ended.EndAt.Add(-time.Millisecond), true); !fresh {
		t.Fatal("a join just before the end: not a fresh ticket")
	}
}

func join(t *testing.T, l sale.Line, a sale.Activity, user string, at time.Time, tail bool) (sale.Ticket, bool) {
	t.Helper()
	j, err := l.Join(context.Background(), sale.JoinRequest{Activity: a, UserID: user,
		Token: sale.NewTicketToken(a.ID), Now: at, Tail: tail})
	if err != nil {
		t.Fatalf("Join(%s, %s): %v", a.ID, user, err)
	}
	// The state that comes with a join is the line's just after it.
	if st, err := l.State(context.Background(), a.ID); err != nil || st != j.Line {
		t.Fatalf("Join(%s, %s) says the line is %+v; State says %+v, %v", a.ID, user, j.Line, st, err)
	}
	return j.Ticket, j.Fresh
}

func ticketOf(t *testing.T, l sale.Line, token string) (sale.Ticket, sale.LineState) {
	t.Helper()
	tk, st, err := l.Ticket(context.Background(), token)
	if err != nil {
		t.Fatalf("Ticket(%s): %v", token, err)
	}
	return tk, st
}

func lineEarlyCrowd(t *testing.T, newLine NewLine) {
	ctx := context.Background()
	l, reopen := newLine(t)
	a := LineItem("line-early", 3, sale.AdmitQueue)
	var tokens []string
	for i := range 6 {
		tk, fresh := join(t, l, a, fmt.Sprintf("u%d", i), a.StartAt.Add(-time.Minute+time.Duration(i)*time.Second), true)
		if !fresh || !tk.Early || tk.Place != -1 || tk.ActivityID != a.ID {
			t.Fatalf("early join %d: %+v fresh=%v, want a fresh early ticket without a place", i, tk, fresh)
		}
		tokens = append(tokens, tk.Token)
	}
	again, fresh := join(t, l, a, "u2", a.StartAt.Add(-time.Second), true)
	if fresh || again.Token != tokens[2] {
		t.Fatalf("second join of u2: token %s fresh=%v, want the first ticket %s back", again.Token, fresh, tokens[2])
	}
	st, err := l.State(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Sealed || st.Early != 6 || st.Joined != 6 || st.Placed != 0 || st.Waiting() != 6 {
		t.Fatalf("state before the start: %+v", st)
	}
	// The first join after the start seals the line: it queues behind the whole early crowd.
	late, _ := join(t, l, a, "late", a.StartAt.Add(time.Second), true)
	if late.Early || late.Place != 6 {
		t.Fatalf("late ticket %+v, want place 6 behind the early crowd", late)
	}
	if st, err = l.Seal(ctx, a); err != nil || !st.Sealed || !st.Drawn || st.Placed != 7 || st.Early != 6 {
		t.Fatalf("Seal: %+v, %v", st, err)
	}
	want := sale.DrawOrder(a.Seed, tokens)
	check := func(l sale.Line) {
		t.Helper()
		for place, tok := range want {
			tk, _ := ticketOf(t, l, tok)
			if tk.Place != int64(place) || !tk.Early {
				t.Fatalf("ticket %s at place %d (early %v), want %d as the draw orders it", tok, tk.Place, tk.Early, place)
			}
		}
		early, err := l.Early(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(early)
		if got := slices.Sorted(slices.Values(tokens)); !slices.Equal(early, got) {
			t.Fatalf("Early = %v, want %v", early, got)
		}
		if tk, _ := ticketOf(t, l, late.Token); tk.Place != 6 || tk.UserID != "late" {
			t.Fatalf("late ticket after reopening: %+v", tk)
		}
	}
	check(l)
	check(reopen())
}

func lineCap(t *testing.T, newLine NewLine) {
	ctx := context.Background()
	l, _ := newLine(t)
	a := LineItem("line-cap", 1, sale.AdmitQueue)
	a.QueueCap = 3
	at := a.StartAt.Add(time.Second)
	for _, u := range []string{"a", "b", "c"} {
		join(t, l, a, u, at, true)
	}
	if _, err := l.Join(ctx, sale.JoinRequest{Activity: a, UserID: "d", Token: sale.NewTicketToken(a.ID), Now: at, Tail: true}); !errors.Is(err, sale.ErrQueueFull) {
		t.Fatalf("fourth join: %v, want ErrQueueFull", err)
	}
	// A user already waiting is not refused by the cap: they get their place back.
	if tk, fresh := join(t, l, a, "b", at, true); fresh || tk.Place != 1 {
		t.Fatalf("b again: %+v fresh=%v", tk, fresh)
	}
	from, to, ts, err := l.Next(ctx, a.ID, 1)
	if err != nil || from != 0 || to != 1 || len(ts) != 1 || ts[0].UserID != "a" {
		t.Fatalf("Next(1) = %d, %d, %+v, %v", from, to, ts, err)
	}
	ts[0].Outcome = sale.OutcomeSoldOut
	if err := l.Admit(ctx, a.ID, from, to, ts, 0); err != nil {
		t.Fatal(err)
	}
	if tk, fresh := join(t, l, a, "d", at, true); !fresh || tk.Place != 3 {
		t.Fatalf("d after one was answered: %+v fresh=%v, want place 3", tk, fresh)
	}
}

func lineLotteryClosed(t *testing.T, newLine NewLine) {
	ctx := context.Background()
	l, _ := newLine(t)
	a := LineItem("line-lottery", 1, sale.AdmitLottery)
	join(t, l, a, "early", a.StartAt.Add(-time.Second), false)
	if _, err := l.Seal(ctx, a); err != nil {
		t.Fatal(err)
	}
	// Even a node whose clock lags behind the start may not add an entry once the draw is made.
	_, err := l.Join(ctx, sale.JoinRequest{Activity: a, UserID: "late", Token: sale.NewTicketToken(a.ID),
		Now: a.StartAt.Add(-time.Second), Tail: false})
	if !errors.Is(err, sale.ErrEnded) {
		t.Fatalf("join after the draw: %v, want ErrEnded", err)
	}
	if st, _ := l.State(ctx, a.ID); st.Joined != 1 || st.Placed != 1 {
		t.Fatalf("state %+v, want the one entry", st)
	}
}

func lineAdmitSkip(t *testing.T, newLine NewLine) {
	ctx := context.Background()
	l, reopen := newLine(t)
	a := LineItem("line-admit", 2, sale.AdmitQueue)
	at := a.StartAt.Add(time.Second)
	var tickets []sale.Ticket
	for i := range 5 {
		tk, _ := join(t, l, a, fmt.Sprintf("u%d", i), at, true)
		tickets = append(tickets, tk)
	}
	from, to, ts, err := l.Next(ctx, a.ID, 2)
	if err != nil || from != 0 || to != 2 || len(ts) != 2 || ts[0].Token != tickets[0].Token || ts[1].Token != tickets[1].Token {
		t.Fatalf("Next(2) = %d, %d, %+v, %v", from, to, ts, err)
	}
	ts[0].Outcome, ts[0].OrderToken, ts[0].AmountCents = sale.OutcomeWon, "o-0", 100
	ts[1].Outcome = sale.OutcomeAlreadyBought
	if err := l.Admit(ctx, a.ID, from, to, ts, 12.5); err != nil {
		t.Fatal(err)
	}
	// The same batch admitted again (a drainer that lost its lease) changes nothing.
	stale := slices.Clone(ts)
	stale[0].Outcome = sale.OutcomeSoldOut
	if err := l.Admit(ctx, a.ID, from, to, stale, 0); err != nil {
		t.Fatal(err)
	}
	tk, st := ticketOf(t, l, tickets[0].Token)
	if tk.Outcome != sale.OutcomeWon || tk.OrderToken != "o-0" || tk.AmountCents != 100 || st.Head != 2 {
		t.Fatalf("admitted ticket %+v in %+v", tk, st)
	}
	if head, err := l.Skip(ctx, a.ID, 1); err != nil || head != 2 {
		t.Fatalf("Skip from a stale head: %d, %v, want the head left at 2", head, err)
	}
	if head, err := l.Skip(ctx, a.ID, 2); err != nil || head != 5 {
		t.Fatalf("Skip: %d, %v, want 5", head, err)
	}
	check := func(l sale.Line) {
		t.Helper()
		for i, want := range []sale.Outcome{sale.OutcomeWon, sale.OutcomeAlreadyBought, "", "", ""} {
			tk, st := ticketOf(t, l, tickets[i].Token)
			if tk.Outcome != want || st.Head != 5 || st.Waiting() != 0 {
				t.Fatalf("ticket %d: outcome %q in %+v, want %q with the head at 5", i, tk.Outcome, st, want)
			}
		}
		if from, to, ts, err := l.Next(ctx, a.ID, 10); err != nil || from != 5 || to != 5 || len(ts) != 0 {
			t.Fatalf("Next after the skip = %d, %d, %v, %v", from, to, ts, err)
		}
	}
	check(l)
	l = reopen()
	check(l)
	// A user whose ticket was answered may join again, at the tail.
	if tk, fresh := join(t, l, a, "u3", at, true); !fresh || tk.Place != 5 || tk.Token == tickets[3].Token {
		t.Fatalf("u3 again: %+v fresh=%v, want a new ticket at place 5", tk, fresh)
	}
	if _, _, err := l.Ticket(ctx, "qforged."+a.ID); !errors.Is(err, sale.ErrNotFound) {
		t.Fatalf("Ticket(forged) = %v, want ErrNotFound", err)
	}
}

// joinAtOnce runs n joins at once, the i-th asking req(i), and returns their tickets in the
// order of i; a join that fails fails the test.
func joinAtOnce(t *testing.T, l sale.Line, n int, req func(i int) sale.JoinRequest) []sale.Ticket {
	t.Helper()
	out := make([]sale.Ticket, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			j, err := l.Join(context.Background(), req(i))
			out[i], errs[i] = j.Ticket, err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return out
}

func lineConcurrent(t *testing.T, newLine NewLine) {
	l, _ := newLine(t)
	a := LineItem("line-crowd", 100, sale.AdmitQueue)
	const users = 200
	tickets := joinAtOnce(t, l, 2*users, func(i int) sale.JoinRequest {
		return sale.JoinRequest{Activity: a, UserID: fmt.Sprintf("u%d", i%users), // every user twice, at once
			Token: sale.NewTicketToken(a.ID), Now: a.StartAt.Add(time.Second), Tail: true}
	})
	byUser := map[string]map[string]bool{}
	places := map[int64]string{}
	for _, tk := range tickets {
		if byUser[tk.UserID] == nil {
			byUser[tk.UserID] = map[string]bool{}
		}
		byUser[tk.UserID][tk.Token] = true
		if other, ok := places[tk.Place]; ok && other != tk.Token {
			t.Fatalf("place %d given to %s and %s", tk.Place, other, tk.Token)
		}
		places[tk.Place] = tk.Token
	}
	for u, toks := range byUser {
		if len(toks) != 1 {
			t.Fatalf("user %s got %d tickets, want one", u, len(toks))
		}
	}
	if len(places) != users {
		t.Fatalf("%d places given, want %d", len(places), users)
	}
	for p := range int64(users) {
		if _, ok := places[p]; !ok {
			t.Fatalf("place %d missing: places are not contiguous", p)
		}
	}
}

// lineSealRace joins an early crowd and a tail crowd at once, so that the seal (the first tail
// join) meets early joins still being made durable: every ticket must get its own place, the
// early crowd exactly the places the draw gives it, the tail behind it.
func lineSealRace(t *testing.T, newLine NewLine) {
	ctx := context.Background()
	l, _ := newLine(t)
	a := LineItem("line-race", 100, sale.AdmitQueue)
	const each = 150
	var early []string
	var tail []sale.Ticket
	for _, tk := range joinAtOnce(t, l, 2*each, func(i int) sale.JoinRequest {
		at := a.StartAt.Add(time.Second) // a node whose clock says the sale has started
		if i%2 == 0 {
			at = a.StartAt.Add(-time.Second) // one whose clock says it has not
		}
		return sale.JoinRequest{Activity: a, UserID: fmt.Sprint("u", i), Token: sale.NewTicketToken(a.ID), Now: at, Tail: true}
	}) {
		if tk.Early {
			early = append(early, tk.Token)
		} else {
			tail = append(tail, tk)
		}
	}
	st, err := l.Seal(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if st.Early != int64(len(early)) || st.Placed != 2*each || st.Joined != 2*each {
		t.Fatalf("state %+v with %d early and %d tail tickets", st, len(early), len(tail))
	}
	places := map[int64]string{}
	for i, tok := range sale.DrawOrder(a.Seed, early) {
		tk, _ := ticketOf(t, l, tok)
		if tk.Place != int64(i) {
			t.Fatalf("early ticket %s at place %d, the draw gives %d", tok, tk.Place, i)
		}
		places[tk.Place] = tok
	}
	for _, tk := range tail {
		if tk.Place < int64(len(early)) {
			t.Fatalf("tail ticket %s at place %d, inside the early crowd of %d", tk.Token, tk.Place, len(early))
		}
		if other, ok := places[tk.Place]; ok {
			t.Fatalf("place %d given to %s and %s", tk.Place, other, tk.Token)
		}
		places[tk.Place] = tk.Token
	}
	if len(places) != 2*each {
		t.Fatalf("%d distinct places for %d tickets", len(places), 2*each)
	}
}

// BenchLine measures line l at n queued users: it fills the line of a with n joins (64 in
// flight) and reports their rate and, when mem is set, the bytes each queued user costs (mem
// reads the memory used); then, at that size, further joins (Join, 64 goroutines a CPU: ns/op is
// the wall time per join, the inverse of the throughput), the latency of one position query at a
// time (TicketLatency) and the throughput of many (Ticket, 16 goroutines a CPU).
func BenchLine(b *testing.B, l sale.Line, a sale.Activity, n int, mem func() int64) {
	ctx := context.Background()
	at := a.StartAt.Add(time.Second)
	join := func(user string) string { // with an Idempotency-Key, as the product page sends
		j, err := l.Join(ctx, sale.JoinRequest{Activity: a, UserID: user, Token: sale.NewTicketToken(a.ID), Key: "click-" + user,
			Now: at, Tail: true})
		if err != nil {
			b.Fatalf("join %s: %v", user, err)
		}
		return j.Token
	}
	var before int64
	if mem != nil {
		before = mem()
	}
	tokens := make([]string, n)
	var next atomic.Int64
	began := time.Now()
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				tokens[i] = join("u" + strconv.Itoa(i))
			}
		})
	}
	wg.Wait()
	fill := time.Since(began)
	st, err := l.State(ctx, a.ID)
	if err != nil || st.Waiting() != int64(n) {
		b.Fatalf("after the fill: %+v, %v; want %d waiting", st, err, n)
	}
	perUser := 0.0
	if mem != nil {
		perUser = float64(mem()-before) / float64(n)
	}
	// A parent benchmark's own metrics are not printed: the fill's figures go with Join's.
	var more atomic.Int64
	b.Run("Join", func(b *testing.B) {
		b.ReportMetric(float64(n)/fill.Seconds(), "fill-joins/s")
		if mem != nil {
			b.ReportMetric(perUser, "B/user")
		}
		b.SetParallelism(64)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				join("x" + strconv.FormatInt(more.Add(1), 10))
			}
		})
	})
	// One position query at a time: its latency. (Ticket below is their throughput.)
	b.Run("TicketLatency", func(b *testing.B) {
		r := rand.New(rand.NewPCG(1, 2))
		for b.Loop() {
			tok := tokens[r.IntN(n)]
			if t, _, err := l.Ticket(ctx, tok); err != nil || t.Token != tok {
				b.Fatalf("Ticket(%s) = %+v, %v", tok, t, err)
			}
		}
	})
	b.Run("Ticket", func(b *testing.B) {
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			r := rand.New(rand.NewPCG(rand.Uint64(), 1))
			for pb.Next() {
				tok := tokens[r.IntN(n)]
				if t, _, err := l.Ticket(ctx, tok); err != nil || t.Token != tok {
					b.Fatalf("Ticket(%s) = %+v, %v", tok, t, err)
				}
			}
		})
	})
}
