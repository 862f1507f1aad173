package embedded

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"seckill/internal/sale"
)

var _ sale.Line = (*Line)(nil)

// Line is the in-process waiting line of embedded mode. Joins are group-committed to the journal
// before they are answered; after a restart the lines are rebuilt from it, the early tickets
// placed again by the draw, which is a function of the seed and the early tokens.
type Line struct {
	journal sale.LineJournal
	lookup  func(context.Context, string) (sale.Activity, error)
	commit  *committer[sale.TicketRow]
	seq     atomic.Int64 // the last ticket row's key

	mu      sync.RWMutex
	lines   map[string]*line
	tickets map[string]*ticket // every ticket by token
}

// Drop implements sale.Line: the line and its tickets leave the journal, then the memory.
func (l *Line) Drop(ctx context.Context, activityID string) error {
	if err := l.journal.DropLine(ctx, activityID); err != nil {
		return fmt.Errorf("%w: drop the line of %s: %w", sale.ErrBusy, activityID, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.lines[activityID]; !ok {
		return nil
	}
	delete(l.lines, activityID)
	for tok, t := range l.tickets {
		if t.line.a.ID == activityID {
			delete(l.tickets, tok)
		}
	}
	return nil
}

// line is one activity's line. mu guards it and its tickets' fields.
type line struct {
	a      sale.Activity
	mu     sync.Mutex
	sealed bool
	head   int64
	early  []*ticket          // until the seal
	drawn  int64              // early tickets placed by the draw
	places []*ticket          // by place; nil where a ticket was never acknowledged
	users  map[string]*ticket // by user: the user's latest ticket
	keys   map[string]*ticket // by keyOf(user, idempotency key): the ticket the join with it took
	rate   float64
	// revision and ends are the latest revision of the activity the line was given, and its
	// end: no join from then on, whatever the joiner's copy says.
	revision int64
	ends     time.Time
}

// newLine returns a's line with nobody in it.
func newLine(a sale.Activity) *line {
	return &line{a: a, users: map[string]*ticket{}, keys: map[string]*ticket{}}
}

// ticket is a ticket in memory. done is open while its join is being committed, and nil after;
// failed says the commit was refused (the ticket was never acknowledged and does not exist).
type ticket struct {
	line    *line
	seq     int64
	token   string
	user    string
	key     string // the idempotency key of the join that took it ("" for none)
	place   int64
	early   bool
	joined  time.Time
	outcome sale.Outcome
	order   string
	amount  int64
	done    chan struct{}
	failed  bool
}

// OpenLine rebuilds the lines in j; lookup reads an activity (its seed places the early
// tickets). Close it to flush.
func OpenLine(ctx context.Context, j sale.LineJournal, lookup func(context.Context, string) (sale.Activity, error)) (*Line, error) {
	l := &Line{journal: j, lookup: lookup, lines: map[string]*line{}, tickets: map[string]*ticket{}}
	recs, err := j.LoadLines(ctx)
	if err != nil {
		return nil, fmt.Errorf("load the lines: %w", err)
	}
	for _, rec := range recs {
		a, err := lookup(ctx, rec.ActivityID)
		if err != nil {
			return nil, fmt.Errorf("load the line of %s: %w", rec.ActivityID, err)
		}
		ln := newLine(a)
		ln.head = rec.Head
		for _, t := range rec.Tickets {
			l.seq.Store(max(l.seq.Load(), t.Seq))
			k := &ticket{line: ln, seq: t.Seq, token: t.Token, user: t.UserID, key: t.Key, place: t.Place, early: t.Early,
				joined: t.JoinedAt, outcome: t.Outcome, order: t.OrderToken, amount: t.AmountCents}
			l.tickets[k.token] = k
			if k.early {
				ln.early = append(ln.early, k)
			} else {
				ln.put(k)
			}
			if u := ln.users[k.user]; u == nil || u.seq < k.seq { // the user's latest ticket
				ln.users[k.user] = k
			}
			if k.key != "" {
				ln.keys[keyOf(k.user, k.key)] = k
			}
		}
		if rec.Sealed {
			ln.draw()
		}
		l.lines[a.ID] = ln
	}
	l.commit = newCommitter(j.AppendTickets, 1024, nil)
	return l, nil
}

// Close waits for the joins being committed and stops taking new ones.
func (l *Line) Close() error { return l.commit.close() }

// put places k at k.place.
func (ln *line) put(k *ticket) {
	for int64(len(ln.places)) <= k.place {
		ln.places = append(ln.places, nil)
	}
	ln.places[k.place] = k
}

// draw seals the line and places the early tickets in the draw's order: the order the journal's
// tokens give again after a restart. ln.mu is held, and no early ticket's join is still being
// committed (see seal).
func (ln *line) draw() {
	ln.sealed = true
	var tokens []string
	byToken := map[string]*ticket{}
	for _, k := range ln.early {
		if !k.failed {
			tokens = append(tokens, k.token)
			byToken[k.token] = k
		}
	}
	for i, tok := range sale.DrawOrder(ln.a.Seed, tokens) {
		k := byToken[tok]
		k.place = int64(i)
		ln.put(k)
	}
	ln.drawn = int64(len(tokens))
	ln.early = nil
}

// keyed returns the ticket the join with key took for user, once its join is committed; nil when
// key is empty or took none (or its ticket was never acknowledged). ln.mu is held, and let go of
// while a join is being committed.
func (ln *line) keyed(user, key string) *ticket {
	if key == "" {
		return nil
	}
	for {
		k := ln.keys[keyOf(user, key)]
		if k == nil || k.done == nil {
			if k != nil && k.failed {
				return nil
			}
			return k
		}
		ln.settle(k) // lets go of ln.mu: look again after
	}
}

// settle waits, ln.mu held, until k's join is committed, and reports whether it was.
func (ln *line) settle(k *ticket) bool {
	for k.done != nil {
		ch := k.done
		ln.mu.Unlock()
		<-ch
		ln.mu.Lock()
	}
	return !k.failed
}

func (l *Line) lineOf(a sale.Activity) *line {
	l.mu.RLock()
	ln := l.lines[a.ID]
	l.mu.RUnlock()
	if ln != nil {
		return ln
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if ln = l.lines[a.ID]; ln == nil {
		ln = newLine(a)
		l.lines[a.ID] = ln
	}
	return ln
}

// Revise implements sale.Line.
func (l *Line) Revise(_ context.Context, a sale.Activity) error {
	ln := l.lineOf(a)
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if a.Revision > ln.revision {
		ln.revision, ln.ends = a.Revision, a.EndAt
	}
	return nil
}

func (l *Line) find(id string) *line {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.lines[id]
}

// state is the line's state; ln.mu is held.
func (ln *line) state() sale.LineState {
	st := sale.LineState{Sealed: ln.sealed, Drawn: ln.sealed, Placed: int64(len(ln.places)), Head: ln.head, Rate: ln.rate}
	st.Joined = st.Placed + int64(len(ln.early))
	st.Early = ln.drawn + int64(len(ln.early))
	return st
}

// waiting reports whether k is still to be answered; ln.mu is held.
func (ln *line) waiting(k *ticket) bool {
	return !k.failed && k.outcome == "" && (k.place < 0 || k.place >= ln.head)
}

// Join implements sale.Line.
func (l *Line) Join(ctx context.Context, r sale.JoinRequest) (sale.Joined, error) {
	ln := l.lineOf(r.Activity)
	ln.mu.Lock()
	if k := ln.keyed(r.UserID, r.Key); k != nil {
		defer ln.mu.Unlock()
		return sale.Joined{Ticket: k.public(ln.a.ID), Fresh: true, Line: ln.state()}, nil
	}
	if r.Lookup {
		ln.mu.Unlock()
		return sale.Joined{}, fmt.Errorf("%w: no ticket was taken with that idempotency key", sale.ErrNotFound)
	}
	if ln.revision > 0 && !r.Now.Before(ln.ends) {
		ln.mu.Unlock()
		return sale.Joined{}, fmt.Errorf("%w: the sale ended at %s", sale.ErrEnded, ln.ends.Format(time.RFC3339Nano))
	}
	tail := ln.sealed || !r.Now.Before(r.Activity.StartAt)
	if tail && !r.Tail {
		ln.mu.Unlock()
		return sale.Joined{}, fmt.Errorf("%w: the entries closed at the start", sale.ErrEnded)
	}
	// Seal first: it may let go of ln.mu, and from here on a join must hold it until its ticket
	// has its place, or two joins of one user could both take one.
	if tail {
		if err := l.seal(ctx, ln); err != nil {
			ln.mu.Unlock()
			return sale.Joined{}, err
		}
	}
	for k := ln.users[r.UserID]; k != nil; k = ln.users[r.UserID] {
		if k.done != nil {
			ln.settle(k) // lets go of ln.mu: look again after
			continue
		}
		if !k.failed && ln.waiting(k) {
			defer ln.mu.Unlock()
			return sale.Joined{Ticket: k.public(ln.a.ID), Line: ln.state()}, nil
		}
		break
	}
	if int64(len(ln.places))+int64(len(ln.early))-ln.head >= r.Activity.QueueCap {
		ln.mu.Unlock()
		return sale.Joined{}, fmt.Errorf("%w: %d tickets are waiting", sale.ErrQueueFull, r.Activity.QueueCap)
	}
	k := &ticket{line: ln, seq: l.seq.Add(1), token: r.Token, user: r.UserID, key: r.Key, place: -1, joined: r.Now,
		done: make(chan struct{})}
	if ln.sealed && !r.Tail {
		ln.mu.Unlock()
		return sale.Joined{}, fmt.Errorf("%w: the entries closed at the start", sale.ErrEnded)
	}
	if ln.sealed { // sealed above, or by a join that came while the user's ticket settled
		k.place = int64(len(ln.places))
		ln.places = append(ln.places, k)
	} else {
		k.early = true
		ln.early = append(ln.early, k)
	}
	ln.users[k.user] = k
	if k.key != "" {
		ln.keys[keyOf(k.user, k.key)] = k
	}
	t := k.public(ln.a.ID)
	st := ln.state()
	ln.mu.Unlock()
	l.mu.Lock()
	l.tickets[k.token] = k
	l.mu.Unlock()

	// The join waits for its ticket's fate, whatever its context: the line's seal waits for it.
	committed := make(chan error, 1)
	l.commit.append(sale.TicketRow{Seq: k.seq, Ticket: t, Key: k.key}, func(err error) { committed <- err })
	err := <-committed
	ln.mu.Lock()
	k.failed = err != nil
	close(k.done)
	k.done = nil
	ln.mu.Unlock()
	if err != nil {
		return sale.Joined{}, fmt.Errorf("%w: record the ticket: %v", sale.ErrBusy, err)
	}
	return sale.Joined{Ticket: t, Fresh: true, Line: st}, nil
}

// seal waits until no early ticket's join is being committed (so that the draw is over exactly
// the tickets the journal has), then records the seal and draws, all without letting go of
// ln.mu: until it is done no ticket can take a place. ln.mu is held.
func (l *Line) seal(ctx context.Context, ln *line) error {
	for !ln.sealed {
		i := slices.IndexFunc(ln.early, func(k *ticket) bool { return k.done != nil })
		if i < 0 {
			if err := l.journal.SealLine(ctx, ln.a.ID); err != nil {
				return fmt.Errorf("%w: seal the line: %v", sale.ErrBusy, err)
			}
			ln.draw()
			return nil
		}
		ln.settle(ln.early[i]) // lets go of ln.mu: more early tickets may come meanwhile
	}
	return nil
}

func (k *ticket) public(activityID string) sale.Ticket {
	return sale.Ticket{Token: k.token, ActivityID: activityID, UserID: k.user, Early: k.early, Place: k.place,
		JoinedAt: k.joined, Outcome: k.outcome, OrderToken: k.order, AmountCents: k.amount}
}

// Ticket implements sale.Line.
func (l *Line) Ticket(ctx context.Context, token string) (sale.Ticket, sale.LineState, error) {
	l.mu.RLock()
	k := l.tickets[token]
	l.mu.RUnlock()
	if k == nil {
		return sale.Ticket{}, sale.LineState{}, fmt.Errorf("ticket %s: %w", token, sale.ErrNotFound)
	}
	ln := k.line
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if !ln.settle(k) {
		return sale.Ticket{}, sale.LineState{}, fmt.Errorf("ticket %s: %w", token, sale.ErrNotFound)
	}
	return k.public(ln.a.ID), ln.state(), nil
}

// State implements sale.Line.
func (l *Line) State(ctx context.Context, activityID string) (sale.LineState, error) {
	ln := l.find(activityID)
	if ln == nil {
		return sale.LineState{}, nil
	}
	ln.mu.Lock()
	defer ln.mu.Unlock()
	return ln.state(), nil
}

// Seal implements sale.Line.
func (l *Line) Seal(ctx context.Context, a sale.Activity) (sale.LineState, error) {
	ln := l.lineOf(a)
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if err := l.seal(ctx, ln); err != nil {
		return sale.LineState{}, err
	}
	return ln.state(), nil
}

// Early implements sale.Line.
func (l *Line) Early(ctx context.Context, activityID string) ([]string, error) {
	ln := l.find(activityID)
	if ln == nil {
		return nil, nil
	}
	ln.mu.Lock()
	defer ln.mu.Unlock()
	var out []string
	for _, k := range ln.places {
		if k != nil && k.early {
			out = append(out, k.token)
		}
	}
	return out, nil
}

// Next implements sale.Line.
func (l *Line) Next(ctx context.Context, activityID string, n int) (int64, int64, []sale.Ticket, error) {
	ln := l.find(activityID)
	if ln == nil {
		return 0, 0, nil, nil
	}
	ln.mu.Lock()
	defer ln.mu.Unlock()
	from := ln.head
	to := min(from+int64(n), int64(len(ln.places)))
	var out []sale.Ticket
	for p := from; p < to; p++ {
		// settle lets go of the lock; the head moves only through this line's one drainer.
		if k := ln.places[p]; k != nil && ln.settle(k) {
			out = append(out, k.public(activityID))
		}
	}
	return from, to, out, nil
}

// Admit implements sale.Line.
func (l *Line) Admit(ctx context.Context, activityID string, from, to int64, ts []sale.Ticket, rate float64) error {
	ln := l.find(activityID)
	if ln == nil {
		return fmt.Errorf("line %s: %w", activityID, sale.ErrNotFound)
	}
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if ln.head != from {
		return nil
	}
	rows := make([]sale.TicketRow, 0, len(ts))
	var admitted []*ticket
	for _, t := range ts {
		if t.Place >= from && t.Place < to {
			if k := ln.places[t.Place]; k != nil && k.token == t.Token {
				rows = append(rows, sale.TicketRow{Seq: k.seq, Ticket: t})
				admitted = append(admitted, k)
			}
		}
	}
	if err := l.journal.AdmitTickets(ctx, activityID, from, to, rows); err != nil {
		return fmt.Errorf("%w: record admissions: %v", sale.ErrBusy, err)
	}
	for i, k := range admitted {
		k.outcome, k.order, k.amount = rows[i].Outcome, rows[i].OrderToken, rows[i].AmountCents
	}
	ln.head, ln.rate = to, rate
	return nil
}

// Skip implements sale.Line.
func (l *Line) Skip(ctx context.Context, activityID string, from int64) (int64, error) {
	ln := l.find(activityID)
	if ln == nil {
		return 0, fmt.Errorf("line %s: %w", activityID, sale.ErrNotFound)
	}
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if ln.head != from {
		return ln.head, nil
	}
	to := int64(len(ln.places))
	if err := l.journal.AdmitTickets(ctx, activityID, from, to, nil); err != nil {
		return from, fmt.Errorf("%w: record the skip: %v", sale.ErrBusy, err)
	}
	ln.head = to
	return to, nil
}

// Lead implements sale.Line: the process is the only drainer of its lines.
func (l *Line) Lead(ctx context.Context, activityID, holder string, ttl time.Duration) (bool, error) {
	return true, nil
}
