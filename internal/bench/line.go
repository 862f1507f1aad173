package bench

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"seckill/internal/httpapi/wire"
	"seckill/internal/sale"
)

// Admission modes bench runs (see sale.Admission).
const (
	AdmitDirect  = "direct"
	AdmitQueue   = "queue"
	AdmitLottery = "lottery"
)

// LineSpec is the waiting line of a queue or lottery run: the activity starts PreQueue after it
// is created, so that the crowd's first clicks form the early crowd the draw shuffles.
type LineSpec struct {
	Admission string // "queue" or "lottery"; "" or "direct": no line
	AdmitRate int64  // tickets admitted a second (0: the server's default)
	QueueCap  int64  // waiting tickets at most (0: the server's default, 10 × stock)
	PreQueue  time.Duration
}

// Lined reports whether the run goes through a line.
func (l LineSpec) Lined() bool { return l.Admission == AdmitQueue || l.Admission == AdmitLottery }

// Validate reports a line that cannot run.
func (l LineSpec) Validate() error {
	switch {
	case l.Admission != "" && l.Admission != AdmitDirect && l.Admission != AdmitReservation && !l.Lined():
		return fmt.Errorf("--admission %q: want direct, queue, lottery or reservation", l.Admission)
	case !l.Lined() && (l.AdmitRate != 0 || l.QueueCap != 0 || l.PreQueue != 0):
		return errors.New("--admit-rate, --queue-cap and --pre-queue are for --admission queue or lottery")
	case l.AdmitRate < 0 || l.AdmitRate > sale.MaxAdmitRate:
		return fmt.Errorf("--admit-rate %d: want 1 to %d", l.AdmitRate, sale.MaxAdmitRate)
	case l.QueueCap < 0 || l.QueueCap > sale.MaxQueueCap:
		return fmt.Errorf("--queue-cap %d: want 1 to %d", l.QueueCap, sale.MaxQueueCap)
	case l.Lined() && (l.PreQueue < time.Second || l.PreQueue > MaxRamp):
		return fmt.Errorf("--pre-queue %s: want 1s to %s", l.PreQueue, MaxRamp)
	}
	return nil
}

// LineReport is what a queue or lottery run found about its line. Every field named after a
// violation is zero in a correct run.
type LineReport struct {
	Admission string  `json:"admission"`
	Tickets   int64   `json:"tickets"`    // distinct tickets acknowledged
	Early     int64   `json:"early"`      // of them, drawn at the start
	QueueFull int64   `json:"queue_full"` // joins refused with QUEUE_FULL
	Closed    int64   `json:"closed"`     // lottery entries refused after the start
	Winners   int64   `json:"winners"`
	Cap       int64   `json:"cap"`
	JoinRPS   float64 `json:"join_rps"` // joins answered a second during the crowd
	AnswerS   float64 `json:"answer_s"` // from the start until the last ticket was answered

	Unanswered int64 `json:"unanswered_tickets"` // tickets still waiting after the line emptied
	Lost       int64 `json:"lost_tickets"`       // acknowledged tickets the server does not know
	OutOfOrder int64 `json:"out_of_order"`       // tickets that won behind one that lost
	DrawOff    int64 `json:"draw_off"`           // early tickets not where the revealed draw puts them
	OverCap    int64 `json:"over_cap"`           // early tickets beyond the cap
	WinnersOff int64 `json:"winners_off"`        // |winners - min(stock, tickets)|, unseen ones counted
	// Unseen counts the users whose ticket was answered already bought, and who hold an order of
	// the activity that none of bench's tickets won: a click whose join the line made but the
	// answer to every one of whose tries was lost (resets, deadlines) gave them a ticket bench
	// never saw, and that ticket won. (A try answered after others were lost is answered the
	// ticket the click's Idempotency-Key took.) Bench keeps each user's first acknowledged ticket,
	// so the later one it knows meets the user's own unit. Not a violation: each is a winner bench
	// could not name.
	Unseen      int64 `json:"unseen_winners,omitempty"`
	Commitments int64 `json:"commitment_off"` // the revealed seed does not hash to the commitment

	Problems []string `json:"problems,omitempty"`
}

// OK reports whether the line kept its own invariants.
func (r LineReport) OK() bool {
	return r.Unanswered == 0 && r.Lost == 0 && r.OutOfOrder == 0 && r.DrawOff == 0 && r.OverCap == 0 &&
		r.WinnersOff == 0 && r.Commitments == 0
}

// lineView is the line part of the public activity.
type lineView struct {
	Line struct {
		QueueCap       int64  `json:"queue_cap"`
		Early          int64  `json:"early"`
		DrawCommitment string `json:"draw_commitment"`
		DrawSeed       string `json:"draw_seed"`
		EntriesURL     string `json:"entries_url"`
	} `json:"line"`
}

// runLine is Run for a queue or lottery sale: the crowd joins the line (its first clicks before
// the start), the line answers everyone, and the checker reads every ticket back and recomputes
// the draw from the revealed seed and the published entries.
func (s Sale) runLine(ctx context.Context, c *Client, bearer func(int) string) (Result, []Record, error) {
	now := time.Now().UTC()
	start := now.Add(s.Line.PreQueue).Truncate(time.Second).Add(time.Second)
	id, err := c.CreateActivity(ctx, s.spec(fmt.Sprintf("bench %s seed %d", s.Line.Admission, s.Seed), start))
	if err != nil {
		return Result{}, nil, err
	}
	var answered atomic.Int64
	stopBar := s.progress(&answered)
	history := Run(ctx, c, id, s.Crowd, s.Clicks(), bearer, func() { answered.Add(1) })
	stopBar()
	if err := ctx.Err(); err != nil {
		return Result{}, history, fmt.Errorf("the crowd was stopped: %w", err)
	}
	rep := LineReport{Admission: s.Line.Admission}
	tickets := map[string]string{} // user -> ticket token, the first acknowledged
	for i := range history {
		r := &history[i]
		switch {
		case r.Ticket != "":
			r.Outcome = Joined
			if _, ok := tickets[r.User]; !ok {
				tickets[r.User] = r.Ticket
			}
		case r.Code == wire.CodeQueueFull:
			r.Outcome = QueueFull
			rep.QueueFull++
		case r.Code == wire.CodeEnded && s.Line.Admission == AdmitLottery:
			r.Outcome = Closed
			rep.Closed++
		}
	}
	rep.Tickets = int64(len(tickets))
	load := Summarize(history)
	rep.JoinRPS = load.RPS

	select { // nothing is answered before the start
	case <-ctx.Done():
		return Result{}, history, ctx.Err()
	case <-time.After(time.Until(start)):
	}
	if err := waitLine(ctx, c, id, s.DrainTimeout); err != nil {
		return Result{}, history, err
	}
	rep.AnswerS = time.Since(start).Seconds()
	if err := s.drain(ctx, c, id); err != nil {
		return Result{}, history, err
	}

	index := make(map[string]int, s.Users)
	for i := range s.Users {
		index[s.User(i)] = i
	}
	synthetic, err := judgeLine(ctx, c, id, s.Stock, s.Concurrency, history, tickets, func(u string) string { return bearer(index[u]) }, &rep)
	if err != nil {
		return Result{}, history, err
	}
	facts, err := s.facts(ctx, c, id, synthetic, bearer)
	if err != nil {
		return Result{}, history, err
	}
	v := Check(synthetic, facts)
	v.Requests = int64(len(history))
	return Result{Verdict: v, Load: load, OK: v.OK() && rep.OK(), Activity: id, Line: &rep,
		DrainS: rep.AnswerS}, history, nil
}

// judgeLine reads back the tickets (user -> token) of activity id's line, as their owners see
// them, and its published draw; holds them to the line's invariants in rep (checkLine); and
// returns the grabs they stand for, for Check: each ticket's answer as if it were a grab's, and
// history's joins that got no answer (each may have taken a unit unseen).
func judgeLine(ctx context.Context, c *Client, id string, stock int64, concurrency int, history []Record, tickets map[string]string,
	bearer func(user string) string, rep *LineReport) ([]Record, error) {
	views, err := readTickets(ctx, c, concurrency, tickets, bearer)
	if err != nil {
		return nil, err
	}
	var pub wire.ActivityResponse
	if err := c.do(ctx, "GET", "/api/activities/"+url.PathEscape(id), "", nil, http.StatusOK, &pub); err != nil {
		return nil, fmt.Errorf("read the activity: %w", err)
	}
	if pub.Line == nil {
		return nil, fmt.Errorf("activity %s shows no line", id)
	}
	entries, err := c.entries(ctx, pub.Line.EntriesURL)
	if err != nil {
		return nil, err
	}
	holders, err := c.holders(ctx, id, tickets, views)
	if err != nil {
		return nil, err
	}
	rep.Cap = pub.Line.QueueCap
	checkLine(rep, stock, tickets, views, pub, entries, holders)

	synthetic := make([]Record, 0, len(tickets))
	for _, r := range history {
		if r.unanswered() {
			synthetic = append(synthetic, r)
		}
	}
	for _, u := range sortedKeys(tickets) {
		v := views[tickets[u]]
		r := Record{User: u, Status: http.StatusOK}
		switch sale.Outcome(v.Status) {
		case sale.OutcomeWon:
			r.Outcome, r.Token, r.Amount = Won, v.OrderToken, v.AmountCents
		case sale.OutcomeAlreadyBought:
			r.Outcome = AlreadyBought
		default:
			r.Outcome = SoldOut
		}
		synthetic = append(synthetic, r)
	}
	return synthetic, nil
}

// waitLine waits, up to timeout, until nobody waits in the activity's line.
func waitLine(ctx context.Context, c *Client, id string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		st, err := c.Stats(ctx, id)
		if err == nil && st.Line != nil && st.Line.Waiting == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the line was not answered in %s (%+v, last error %v)", timeout, st.Line, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// readTickets reads every ticket (user -> token) as its owner sees it, concurrency at once; a
// 404 is a zero view.
func readTickets(ctx context.Context, c *Client, concurrency int, tickets map[string]string, bearer func(user string) string) (map[string]wire.TicketResponse, error) {
	out := make(map[string]wire.TicketResponse, len(tickets))
	var mu sync.Mutex
	var firstErr error
	work := make(chan [2]string)
	var wg sync.WaitGroup
	for range min(concurrency, 32) {
		wg.Go(func() {
			for w := range work {
				var v wire.TicketResponse
				err := c.do(ctx, "GET", "/api/queue/"+url.PathEscape(w[1]), bearer(w[0]), nil, http.StatusOK, &v)
				var ae *apiError
				if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
					err = nil
				}
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("ticket %s of %s: %w", w[1], w[0], err)
				}
				out[w[1]] = v
				mu.Unlock()
			}
		})
	}
	for u, tok := range tickets {
		work <- [2]string{u, tok}
	}
	close(work)
	wg.Wait()
	return out, firstErr
}

// holders returns which of the users whose ticket (user -> token) was answered already bought
// hold an order of activity id, asked of the operator's order list.
func (c *Client) holders(ctx context.Context, id string, tickets map[string]string, views map[string]wire.TicketResponse) (map[string]bool, error) {
	held := map[string]bool{}
	for _, u := range sortedKeys(tickets) {
		if sale.Outcome(views[tickets[u]].Status) != sale.OutcomeAlreadyBought {
			continue
		}
		var resp wire.OrdersResponse
		q := url.Values{"user": {u}, "activity": {id}, "limit": {"1"}}
		if err := c.do(ctx, "GET", "/api/admin/orders?"+q.Encode(), c.admin, nil, http.StatusOK, &resp); err != nil {
			return nil, fmt.Errorf("the orders of %s, whose ticket was answered already bought: %w", u, err)
		}
		held[u] = len(resp.Orders) > 0
	}
	return held, nil
}

// entries reads the draw's published entries.
func (c *Client) entries(ctx context.Context, path string) ([]string, error) {
	if path == "" {
		return nil, errors.New("the activity publishes no entries: the line was never drawn")
	}
	resp, _, err := c.send(0, func(base string) (*http.Request, error) {
		return http.NewRequestWithContext(ctx, "GET", base+path, nil)
	})
	if err != nil {
		return nil, fmt.Errorf("read the entries: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read the entries: %s", resp.Status)
	}
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out, sc.Err()
}

// checkLine checks the line's own invariants: every ticket answered and known; the early crowd
// in the order the revealed seed draws; the winners the line's first tickets, as many as the
// stock allows (counting a user answered already bought who holds an order, holders[user], as
// the winner of a ticket bench never saw: LineReport.Unseen); the early crowd within the cap.
func checkLine(rep *LineReport, stock int64, tickets map[string]string, views map[string]wire.TicketResponse, pub wire.ActivityResponse,
	entries []string, holders map[string]bool) {
	seen := map[string]int{}
	problem := func(kind, format string, args ...any) {
		if seen[kind]++; seen[kind] <= maxProblems {
			rep.Problems = append(rep.Problems, kind+": "+fmt.Sprintf(format, args...))
		}
	}
	seed, err := sale.ParseSeed(pub.Line.DrawSeed)
	sum := sha256.Sum256(seed[:])
	if err != nil || hex.EncodeToString(sum[:]) != pub.Line.DrawCommitment {
		problem("commitment", "the revealed seed %q does not hash to the commitment %s", pub.Line.DrawSeed, pub.Line.DrawCommitment)
		rep.Commitments++
	}
	drawn := map[string]int64{}
	for i, tok := range sale.DrawOrder(seed, entries) {
		drawn[tok] = int64(i) + 1
	}
	type placed struct {
		place int64
		tok   string
		won   bool
	}
	var line []placed
	for _, u := range sortedKeys(tickets) {
		tok := tickets[u]
		v := views[tok]
		status := sale.Outcome(v.Status)
		switch {
		case status == "":
			problem("lost", "ticket %s of %s is unknown to the server", tok, u)
			rep.Lost++
			continue
		case status == sale.OutcomeWaiting:
			problem("unanswered", "ticket %s of %s still waits", tok, u)
			rep.Unanswered++
			continue
		case v.Place == nil:
			problem("unanswered", "ticket %s of %s was answered %s without a place", tok, u, v.Status)
			rep.Unanswered++
			continue
		}
		if v.Early {
			rep.Early++
			if drawn[tok] != *v.Place {
				problem("draw", "early ticket %s is at place %d; the revealed draw puts it at %d", tok, *v.Place, drawn[tok])
				rep.DrawOff++
			}
		}
		switch {
		case status == sale.OutcomeWon:
			rep.Winners++
		case status == sale.OutcomeAlreadyBought && holders[u]:
			rep.Unseen++
		case status == sale.OutcomeAlreadyBought:
			problem("winners", "ticket %s of %s was answered already bought, and %s holds no order of the activity", tok, u, u)
			rep.WinnersOff++
		}
		if status != sale.OutcomeAlreadyBought {
			line = append(line, placed{*v.Place, tok, status == sale.OutcomeWon})
		}
	}
	sort.Slice(line, func(i, j int) bool { return line[i].place < line[j].place })
	lost := slices.IndexFunc(line, func(p placed) bool { return !p.won })
	for i := lost + 1; lost >= 0 && i < len(line); i++ {
		if line[i].won {
			problem("order", "ticket %s at place %d won behind %s at place %d, which lost", line[i].tok, line[i].place,
				line[lost].tok, line[lost].place)
			rep.OutOfOrder++
		}
	}
	if want := min(stock, int64(len(line))+rep.Unseen); rep.Winners+rep.Unseen != want {
		problem("winners", "%d tickets won (%d more unseen); the stock of %d and %d tickets (%d unseen) make %d", rep.Winners, rep.Unseen, stock,
			int64(len(line))+rep.Unseen, rep.Unseen, want)
		rep.WinnersOff += abs(rep.Winners + rep.Unseen - want)
	}
	if over := pub.Line.Early - pub.Line.QueueCap; pub.Line.QueueCap > 0 && over > 0 {
		problem("cap", "%d early tickets waited at the start, over the cap of %d", pub.Line.Early, pub.Line.QueueCap)
		rep.OverCap = over
	}
}
