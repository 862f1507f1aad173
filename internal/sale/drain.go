package sale

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Drainer admits the tickets of lined activities to the gate, for every such activity this node
// knows: one round each tick, on the activities whose line this node leads (Line.Lead), so that
// one drainer works each line however many nodes run one.
type Drainer struct {
	svc    *Service
	holder string
	tick   time.Duration

	mu    sync.Mutex
	lines map[string]*draining

	// observe, if set, is told of every ticket admitted: its outcome and how long it waited.
	observe func(activityID string, outcome Outcome, waited time.Duration)
}

// Observe makes the drainer tell observe of every ticket it admits, with the time from the join
// (from the start, for the early crowd) to the admission.
func (d *Drainer) Observe(observe func(activityID string, outcome Outcome, waited time.Duration)) *Drainer {
	d.observe = observe
	return d
}

// draining is a drainer's memory of one line: the admission budget and the measured rate. It is
// only a pace; losing it (another node takes over) costs nothing but a tick's budget.
type draining struct {
	last   time.Time // the last round's time
	budget float64   // tickets that may be admitted now
	recent []admitted
	// atLoss says the head stands just past a ticket the gate turned away for want of stock,
	// asked in place order, and nothing was handed the gate since: every ticket behind it may
	// be answered sold out. Nothing less proves it. A batch handed the gate may have won units
	// for tickets past the head whose outcomes were never recorded: its drainer died, or its
	// record failed, or some of its grabs failed and the rest won (a link reset mid-batch), and
	// the smaller batches that asked its tickets again moved the head only part of the way
	// through it before the gate ran out. Those wins are found by asking the tickets at the
	// head again, in order, until one loses. A drainer new to the line knows nothing of the
	// batches before it, and starts without the proof.
	atLoss bool
}

type admitted struct {
	at time.Time
	n  int64
}

// Drain limits.
const (
	maxDrainBatch  = 4096 // tickets admitted in one round at most
	drainInFlight  = 64   // grabs of a round in flight at once
	rateWindow     = 5 * time.Second
	drainLeaseTick = 20 // the lease lasts this many ticks: a dead drainer is replaced that soon
)

// NewDrainer returns a drainer for s's lines, known to the others as holder, that runs a round
// every tick.
func (l *Lines) NewDrainer(holder string, tick time.Duration) *Drainer {
	s := l.core
	return &Drainer{svc: s, holder: holder, tick: tick, lines: map[string]*draining{}}
}

// Run drains until ctx ends. A round that fails is logged by report and tried again next tick:
// every step is idempotent.
func (d *Drainer) Run(ctx context.Context, report func(activityID string, err error)) {
	t := time.NewTicker(d.tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, a := range d.svc.Current() {
			if !a.Lined() {
				continue
			}
			if _, err := d.Round(ctx, a); err != nil && ctx.Err() == nil {
				report(a.ID, err)
			}
		}
	}
}

// Round runs one round of a's line: it seals the line at the start (placing the early tickets in
// the draw's order), then admits the tickets at the head that the budget allows and the gate can
// serve, in order, and answers everyone waiting once the gate has nothing left. It returns the
// tickets answered.
func (d *Drainer) Round(ctx context.Context, a Activity) (int64, error) {
	s := d.svc
	lead, err := s.line.Lead(ctx, a.ID, d.holder, drainLeaseTick*d.tick)
	if err != nil || !lead {
		d.forget(a.ID)
		return 0, err
	}
	now := s.now()
	if now.Before(a.StartAt) {
		return 0, nil
	}
	st, err := s.line.State(ctx, a.ID)
	if err != nil {
		return 0, err
	}
	if !st.Sealed || !st.Drawn {
		if st, err = s.line.Seal(ctx, a); err != nil {
			return 0, fmt.Errorf("seal the line: %w", err)
		}
	}
	if !now.Before(a.EndAt) || st.Head >= st.Placed {
		d.pace(a, now, 0)
		return 0, nil
	}
	mark := s.markSoldOut(a.ID)
	rem, err := s.Remaining(ctx, a.ID)
	if err != nil {
		return 0, err
	}
	var n int64
	switch {
	case rem <= 0 && d.atLoss(a.ID):
		head, err := s.line.Skip(ctx, a.ID, st.Head)
		if err != nil {
			return 0, fmt.Errorf("answer the line sold out: %w", err)
		}
		s.raiseSoldOut(mark)
		return head - st.Head, nil
	case rem <= 0:
		// The gate has nothing left, but batches handed it may have taken units for tickets
		// past the head and never recorded their outcomes: those tickets won. Their keys
		// return those wins, so the tickets at the head are asked again in order up to the
		// first that loses, the proof that no ticket behind it won (see draining.atLoss); the
		// next round answers the rest sold out. Each batch was no bigger than the stock it
		// found and its unasked tickets find units in turn, so a gate with nothing left holds
		// no ticket's unit past those wins, and no batch is more than maxDrainBatch: asking so
		// many finds the first loss.
		n = maxDrainBatch
	default:
		// Never more than the gate has: every ticket of a batch then wins (but for a buyer at
		// the per-user limit), so the winners are the line's first tickets, whatever order the
		// batch's grabs reach the gate in.
		n = min(int64(d.budget(a, now)), rem, maxDrainBatch)
	}
	if n < 1 {
		return 0, nil
	}
	from, to, ts, err := s.line.Next(ctx, a.ID, int(n))
	if err != nil || to == from {
		return 0, err
	}
	d.setAtLoss(a.ID, false)
	var lost bool
	if rem <= 0 {
		// Asked again one at a time, in place order, up to the first that loses: units that
		// come back meanwhile (a restock, a cancel) go to the first tickets still waiting, and
		// the rest are answered by the skip of the next round.
		var k int
		if k, lost, err = d.admitInOrder(ctx, a, now, ts); err != nil {
			return 0, err
		}
		if k < len(ts) {
			ts, to = ts[:k], ts[k-1].Place+1
		}
	} else if err := d.admit(ctx, a, now, ts); err != nil {
		return 0, err
	}
	paced := to - from
	if rem <= 0 {
		paced = 0 // answers of a sold-out line, as a skip's: not the admission's pace
	}
	rate := d.pace(a, now, paced)
	if err := s.line.Admit(ctx, a.ID, from, to, ts, rate); err != nil {
		return 0, fmt.Errorf("record the admitted tickets: %w", err)
	}
	d.setAtLoss(a.ID, lost)
	if d.observe != nil {
		for _, t := range ts {
			d.observe(a.ID, t.Outcome, now.Sub(later(t.JoinedAt, a.StartAt)))
		}
	}
	return to - from, nil
}

// admit grabs a unit for each ticket and sets its outcome. A failure of the gate fails the whole
// batch, which the next round admits again: the grabs already made are returned by their
// idempotency keys, not made twice.
func (d *Drainer) admit(ctx context.Context, a Activity, now time.Time, ts []Ticket) error {
	var wg sync.WaitGroup
	errs := make([]error, len(ts))
	sem := make(chan struct{}, drainInFlight)
	for i := range ts {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = d.admitOne(ctx, a, now, &ts[i])
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// admitInOrder grabs for ts one after another and stops after the first that the gate turns
// away for want of stock (or because the sale ended), returning how many have their outcome and
// whether the last of them lost. A failure of the gate fails the round, as admit's.
func (d *Drainer) admitInOrder(ctx context.Context, a Activity, now time.Time, ts []Ticket) (int, bool, error) {
	for i := range ts {
		if err := d.admitOne(ctx, a, now, &ts[i]); err != nil {
			return 0, false, err
		}
		if o := ts[i].Outcome; o == OutcomeSoldOut || o == OutcomeNotDrawn || o == OutcomeEnded {
			return i + 1, true, nil
		}
	}
	return len(ts), false, nil
}

// admitOne grabs a unit for t under its ticket's key and sets its outcome.
func (d *Drainer) admitOne(ctx context.Context, a Activity, now time.Time, t *Ticket) error {
	g, err := d.svc.grab(ctx, a, GrabRequest{ActivityID: a.ID, UserID: t.UserID, IdempotencyKey: LineKey(t.Token), Now: now})
	switch {
	case err == nil:
		t.Outcome, t.OrderToken, t.AmountCents = OutcomeWon, g.Token, g.AmountCents
	case errors.Is(err, ErrSoldOut) && a.Admission == AdmitLottery:
		t.Outcome = OutcomeNotDrawn
	case errors.Is(err, ErrSoldOut):
		t.Outcome = OutcomeSoldOut
	case errors.Is(err, ErrAlreadyBought):
		t.Outcome = OutcomeAlreadyBought
	case errors.Is(err, ErrEnded):
		t.Outcome = OutcomeEnded
	default:
		return fmt.Errorf("admit ticket %s: %w", t.Token, err)
	}
	return nil
}

// LineKey is the idempotency key of the grab that admits a ticket.
func LineKey(ticketToken string) string { return "line:" + ticketToken }

// budget returns the tickets a may admit at now: its admit rate since the last round, with at
// most a second's worth saved up; a lottery draws as fast as the gate takes it.
func (d *Drainer) budget(a Activity, now time.Time) float64 {
	if a.Admission == AdmitLottery {
		return maxDrainBatch
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.lineOf(a.ID)
	if l.last.IsZero() {
		l.last = now.Add(-d.tick)
	}
	rate := float64(a.AdmitRate)
	l.budget = min(l.budget+rate*now.Sub(l.last).Seconds(), max(rate, 1))
	l.last = now
	return l.budget
}

// pace takes n admissions off a's budget and returns the rate measured over the last seconds.
func (d *Drainer) pace(a Activity, now time.Time, n int64) float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.lineOf(a.ID)
	l.budget -= float64(n)
	if n > 0 {
		l.recent = append(l.recent, admitted{now, n})
	}
	i := 0
	for i < len(l.recent) && now.Sub(l.recent[i].at) > rateWindow {
		i++
	}
	l.recent = l.recent[i:]
	if len(l.recent) == 0 {
		return 0
	}
	var sum int64
	for _, r := range l.recent {
		sum += r.n
	}
	span := max(now.Sub(l.recent[0].at)+d.tick, d.tick)
	return float64(sum) / span.Seconds()
}

func (d *Drainer) lineOf(id string) *draining {
	l, ok := d.lines[id]
	if !ok {
		l = &draining{}
		d.lines[id] = l
	}
	return l
}

// atLoss reports whether the head of the line of id stands just past a ticket that lost, asked in
// order, with nothing handed the gate since (draining.atLoss).
func (d *Drainer) atLoss(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lineOf(id).atLoss
}

func (d *Drainer) setAtLoss(id string, ok bool) {
	d.mu.Lock()
	d.lineOf(id).atLoss = ok
	d.mu.Unlock()
}

func (d *Drainer) forget(id string) {
	d.mu.Lock()
	delete(d.lines, id)
	d.mu.Unlock()
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
