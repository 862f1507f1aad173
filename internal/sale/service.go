package sale

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Service runs sales on a gate, a queue and a store. It is what the HTTP layer and the workers
// call. Besides its dependencies it holds only caches a node may lose at any time: the local
// sold-out flags and its copy of the blacklist.
type Service struct {
	gate  Gate
	queue Queue
	store Store
	now   func() time.Time

	// soldOut remembers, per activity, until when the gate last said it was sold out: the local
	// sold-out flag that turns the crowd away before it costs a token check or a gate call.
	soldOut    sync.Map // activity id -> *atomic.Int64 (Unix nanoseconds, real time)
	soldOutTTL time.Duration
	restocks   Restocks // nil: this node is the only one
	// reconcilePause is how long a reconcile waits between its two readings: a grab in flight
	// lands meanwhile, and a drift it caused does not last.
	reconcilePause time.Duration

	blocked Blocklist // this node's copy of the blacklist

	challenges Challenges // nil: challenges cannot be handed out

	event func(name string, n int) // told of orders paid and cancelled by their buyers

	// acts caches the activities this node has read: they never change once created.
	acts   sync.Map // id -> Activity
	misses *misses  // ids the database said it does not have, for a moment

	warming flights // the rebuilds of activities the gate lost, one at a time per activity

	ranking Ranking     // red packets' leaderboards beside the gate; nil: none
	leaders LeaderStore // the database's answer to leaderboards; nil: none

	line    Line     // the waiting lines of queue and lottery activities; nil: none
	entries sync.Map // activity id -> []string, a drawn line's entries, sorted (they never change)
}

// SoldOutTTL is how long a node trusts a sold-out answer without asking the gate again, when
// restocks are not announced: the longest a unit restocked through another node waits before
// this node sells it.
const SoldOutTTL = time.Second

// NewService returns a Service. now is the clock (time.Now outside tests).
func NewService(g Gate, q Queue, s Store, now func() time.Time) *Service {
	return &Service{gate: g, queue: q, store: s, now: now, soldOutTTL: SoldOutTTL, event: func(string, int) {},
		reconcilePause: 100 * time.Millisecond, misses: newMisses(maxMisses)}
}

// WithReconcilePause sets how long a reconcile waits between its two readings (100 ms).
func (s *Service) WithReconcilePause(d time.Duration) *Service {
	s.reconcilePause = d
	return s
}

// WithEvents makes the service tell event of every order a buyer pays ("paid") or cancels
// ("cancelled"), for the metrics.
func (s *Service) WithEvents(event func(name string, n int)) *Service {
	s.event = event
	return s
}

// WithRestocks makes the service announce every restock to the other nodes through r, and trust
// its sold-out flags for ttl: announcements clear them at once, and ttl only bounds how long a
// missed announcement can keep a unit unsold. Call ListenRestocks to hear the other nodes.
func (s *Service) WithRestocks(r Restocks, ttl time.Duration) *Service {
	s.restocks, s.soldOutTTL = r, ttl
	return s
}

// ListenRestocks clears the local sold-out flag of every activity another node restocks, until
// ctx ends.
func (s *Service) ListenRestocks(ctx context.Context) error {
	if s.restocks == nil {
		return nil
	}
	return s.restocks.Listen(ctx, func(activityID string) { s.flagSoldOut(activityID, time.Time{}) })
}

// Now returns the service's clock reading.
func (s *Service) Now() time.Time { return s.now() }

// CreateActivity validates a, gives it an id if it has none, stores it (splitting a red packet
// into its shares first) and opens it in the gate. Errors: ErrInvalid, ErrExists.
func (s *Service) CreateActivity(ctx context.Context, a Activity) (Activity, error) {
	if a.ID == "" {
		a.ID = NewToken("a")[:13]
	}
	if a.PerUserLimit == 0 {
		a.PerUserLimit = 1
	}
	if a.Admission == "" {
		a.Admission = AdmitDirect
	}
	if a.StockShards == 0 {
		a.StockShards = 1
	}
	if a.Lined() {
		if a.QueueCap == 0 {
			a.QueueCap = min(DefaultQueueFactor*a.Stock, MaxQueueCap)
		}
		if a.AdmitRate == 0 {
			a.AdmitRate = DefaultAdmitRate
		}
		if a.Seed == (Seed{}) {
			seed, err := NewSeed()
			if err != nil {
				return Activity{}, err
			}
			a.Seed = seed
		}
		if s.line == nil {
			return Activity{}, fmt.Errorf("%w: admission %q needs a line, and this node has none", ErrInvalid, a.Admission)
		}
	}
	a.CreatedAt = s.now().UTC().Truncate(time.Millisecond)
	a.StartAt = a.StartAt.UTC().Truncate(time.Millisecond)
	a.EndAt = a.EndAt.UTC().Truncate(time.Millisecond)
	if err := a.Validate(); err != nil {
		return Activity{}, err
	}
	var shares []int64
	st := GateState{}
	if a.Kind == KindRedPacket {
		var err error
		if shares, err = SplitRedPacket(a.TotalCents, a.Stock, rand.Int64N); err != nil {
			return Activity{}, err
		}
		st.Shares = make([]Share, len(shares))
		for i, c := range shares {
			st.Shares[i] = Share{Index: int64(i), AmountCents: c}
		}
	}
	if err := s.store.CreateActivity(ctx, a, shares); err != nil {
		return Activity{}, fmt.Errorf("create activity %s: %w", a.ID, err)
	}
	s.remember(a)
	if err := s.gate.Load(ctx, a, st); err != nil {
		return Activity{}, fmt.Errorf("open activity %s in the gate: %w", a.ID, err)
	}
	if err := s.loadRanking(ctx, a, st, nil); err != nil {
		return Activity{}, fmt.Errorf("open the leaderboard of %s: %w", a.ID, err)
	}
	return a, nil
}

// Warm loads every activity that has not ended by since into the gate, from the database and
// the queue, unless the gate holds it already: on start, this rebuilds what a restart (or kill
// -9, or a cache that lost its data) lost. While an activity is absent from the gate nothing can
// be sold from it, so the state read here cannot move before Warm stores it.
func (s *Service) Warm(ctx context.Context, since time.Time) error {
	acts, err := s.store.Activities(ctx, since)
	if err != nil {
		return fmt.Errorf("warm up: %w", err)
	}
	for _, a := range acts {
		s.remember(a)
		if _, err := s.gate.Remaining(ctx, a.ID); err == nil {
			continue // loaded already: by another node, or the cache outlived this process
		} else if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrUnloaded) {
			return fmt.Errorf("warm up activity %s: %w", a.ID, err)
		}
		st, queued, err := s.gateState(ctx, a)
		if err != nil {
			return fmt.Errorf("warm up activity %s: %w", a.ID, err)
		}
		if _, err := s.gate.Warm(ctx, a, st); err != nil {
			return fmt.Errorf("warm up activity %s: %w", a.ID, err)
		}
		if err := s.loadRanking(ctx, a, st, queued); err != nil {
			return fmt.Errorf("warm up the leaderboard of %s: %w", a.ID, err)
		}
	}
	return nil
}

// warmOne loads one activity into the gate unless it is there. The grabs and reads that find
// it absent together share one rebuild: a crowd meeting a cache that lost the activity costs one
// read of the database and the queue, not one each.
func (s *Service) warmOne(ctx context.Context, id string) error {
	return s.warming.do(ctx, id, func() error {
		call, cancel := context.WithTimeout(context.WithoutCancel(ctx), rebuildWithin)
		defer cancel()
		return s.rebuild(call, id)
	})
}

// Archive drops a's hot state (its gate, line and leaderboard) once nothing can change it any
// more: its sale and every pay window are over (no CREATED order is left: the sweeper closed
// them), its queue is drained and no restock of it is owed. The database is told first, so that
// no node rebuilds what is being dropped (a read of an archived activity answers from the
// database), then each store drops its part; a second call drops again, harmlessly. It reports
// whether a was archived now or before; false, nil means not yet.
func (s *Service) Archive(ctx context.Context, a Activity) (bool, error) {
	if s.now().Before(a.EndAt.Add(a.PayWindow)) {
		return false, nil
	}
	if n, err := s.queue.Depth(ctx, a.ID); err != nil || n > 0 {
		return false, err
	}
	c, err := s.store.Counts(ctx, a.ID)
	if err != nil || c.Created > 0 {
		return false, err
	}
	owed, err := s.store.Unreleased(ctx, maxOwedChecked)
	if err != nil || slices.ContainsFunc(owed, func(o Order) bool { return o.ActivityID == a.ID }) {
		return false, err
	}
	if !a.Archived() {
		if err := s.store.Archive(ctx, a.ID, s.now()); err != nil {
			return false, fmt.Errorf("archive %s: %w", a.ID, err)
		}
		if a, err = s.store.Activity(ctx, a.ID); err != nil {
			return false, fmt.Errorf("archive %s: %w", a.ID, err)
		}
	}
	s.remember(a)
	if err := s.gate.Drop(ctx, a.ID); err != nil {
		return false, fmt.Errorf("archive %s: %w", a.ID, err)
	}
	if a.Lined() && s.line != nil {
		if err := s.line.Drop(ctx, a.ID); err != nil {
			return false, fmt.Errorf("archive %s: %w", a.ID, err)
		}
	}
	if a.Kind == KindRedPacket && s.ranking != nil {
		if err := s.ranking.Drop(ctx, a.ID); err != nil {
			return false, fmt.Errorf("archive %s: %w", a.ID, err)
		}
	}
	s.soldOut.Delete(a.ID)
	s.entries.Delete(a.ID)
	return true, nil
}

// maxOwedChecked is how many owed restocks Archive looks through for one of its activity.
const maxOwedChecked = 10_000

// ArchiveDue archives the activities whose pay windows closed more than keep ago (see Archive),
// and drops again those archived in the last hour (a node that died mid-drop, a rebuild that
// raced it). It reports how many it archived.
func (s *Service) ArchiveDue(ctx context.Context, keep time.Duration) (int, error) {
	now := s.now()
	// Activities that ended within a week before the due ones: those ended earlier were
	// archived by earlier rounds (a cluster down for longer leaves them to an operator).
	acts, err := s.store.Activities(ctx, now.Add(-keep-MaxPayWindow-archiveBacklog))
	if err != nil {
		return 0, fmt.Errorf("archive: %w", err)
	}
	n := 0
	for _, a := range acts {
		due := !now.Before(a.EndAt.Add(a.PayWindow + keep))
		if !due || a.Archived() && now.Sub(a.ArchivedAt) > time.Hour {
			continue
		}
		fresh := !a.Archived()
		done, err := s.Archive(ctx, a)
		if err != nil {
			return n, err
		}
		if done && fresh {
			n++
		}
	}
	return n, nil
}

// archiveBacklog is how far past its due time an activity is still looked at by ArchiveDue.
const archiveBacklog = 7 * 24 * time.Hour

// rebuildWithin bounds a shared rebuild of an activity in the gate.
const rebuildWithin = 30 * time.Second

// rebuild reads what the gate must hold for activity id and stores it, unless another node got
// there first.
func (s *Service) rebuild(ctx context.Context, id string) error {
	a, err := s.store.Activity(ctx, id)
	if err != nil {
		return err
	}
	if a.Archived() {
		s.remember(a)
		return fmt.Errorf("activity %s: %w", id, errArchived)
	}
	st, queued, err := s.gateState(ctx, a)
	if err != nil {
		return fmt.Errorf("rebuild activity %s: %w", id, err)
	}
	loaded, err := s.gate.Warm(ctx, a, st)
	if err != nil {
		return fmt.Errorf("rebuild activity %s: %w", id, err)
	}
	if loaded {
		if err := s.loadRanking(ctx, a, st, queued); err != nil {
			return fmt.Errorf("rebuild the leaderboard of %s: %w", id, err)
		}
	}
	return nil
}

// gateState is what the gate of a must hold: the database's orders plus the queue's grabs,
// which it returns too.
func (s *Service) gateState(ctx context.Context, a Activity) (GateState, []Grab, error) {
	unacked, err := s.queue.Unacked(ctx, a.ID)
	if err != nil {
		return GateState{}, nil, err
	}
	st, err := s.store.GateState(ctx, a, unacked)
	return st, unacked, err
}

// Reconciliation compares the gate with the database for one activity.
type Reconciliation struct {
	OK                bool   `json:"ok"`
	Stock             int64  `json:"stock"`
	GateRemaining     int64  `json:"gate_remaining"`
	ExpectedRemaining int64  `json:"expected_remaining"` // stock less what the database and queue hold
	Held              int64  `json:"held"`
	Drift             int64  `json:"drift"` // gate_remaining - expected_remaining
	Repaired          bool   `json:"repaired"`
	Outcome           string `json:"outcome"` // ReconcileOK, ReconcileDrift, ReconcileRepaired or ReconcileUnsettled
	Note              string `json:"note,omitempty"`
}

// The outcomes of a reconciliation.
const (
	ReconcileOK        = "ok"        // the gate agrees with the database and the queue
	ReconcileDrift     = "drift"     // a drift seen twice at rest, not repaired (Check)
	ReconcileRepaired  = "repaired"  // a drift seen twice at rest, repaired (Reconcile)
	ReconcileUnsettled = "unsettled" // grabs moved the gate while it was read: nothing concluded
	ReconcileArchived  = "archived"  // the activity's hot state is archived: nothing to compare
)

// Reconcile compares the gate's remaining units with what the database and the queue say, and
// repairs the gate when the two disagree. A grab in flight (taken by the gate, not yet durable)
// looks like drift for a moment, so the comparison is made twice, 100 ms apart (see
// WithReconcilePause), and only a drift
// seen both times with the gate standing still is repaired; the repair itself reads the database
// once more and is made only if nothing moved in the gate meanwhile (Gate.Repair), so that a
// reconcile under live traffic never erases a grab.
func (s *Service) Reconcile(ctx context.Context, id string) (Reconciliation, error) {
	return s.reconcile(ctx, id, true)
}

// Check is Reconcile without the repair: it reports a drift seen twice at rest, and leaves the
// gate as it is (Note says so).
func (s *Service) Check(ctx context.Context, id string) (Reconciliation, error) {
	return s.reconcile(ctx, id, false)
}

func (s *Service) reconcile(ctx context.Context, id string, repair bool) (Reconciliation, error) {
	a, err := s.Activity(ctx, id)
	if err != nil {
		return Reconciliation{}, err
	}
	var rec Reconciliation
	for round := 0; round < 2; round++ {
		if round > 0 {
			select {
			case <-ctx.Done():
				return Reconciliation{}, ctx.Err()
			case <-time.After(s.reconcilePause):
			}
		}
		before, err := s.gate.Remaining(ctx, id)
		if absent(err) {
			if fresh, ferr := s.store.Activity(ctx, id); ferr == nil && fresh.Archived() {
				s.remember(fresh)
				return Reconciliation{OK: true, Outcome: ReconcileArchived, Stock: a.Stock,
					Note: "archived: the gate holds nothing of it, the database alone answers"}, nil
			}
		}
		if err != nil {
			return Reconciliation{}, err
		}
		st, _, err := s.gateState(ctx, a)
		if err != nil {
			return Reconciliation{}, err
		}
		after, err := s.gate.Remaining(ctx, id)
		if err != nil {
			return Reconciliation{}, err
		}
		prev := rec.Drift
		rec = s.compare(a, st, after)
		if before != after {
			rec.Outcome, rec.Note = ReconcileUnsettled, "grabs are in flight; the gate was not compared at rest, try again"
			return rec, nil
		}
		if rec.Drift == 0 {
			rec.OK, rec.Outcome = true, ReconcileOK
			return rec, nil
		}
		if round > 0 && rec.Drift != prev {
			rec.Outcome, rec.Note = ReconcileUnsettled, "the drift moved between two readings; not repaired, try again"
			return rec, nil
		}
	}
	if !repair {
		rec.Outcome, rec.Note = ReconcileDrift, "drift seen twice with the gate at rest; report only, not repaired"
		return rec, nil
	}
	drift := rec.Drift
	var queued []Grab
	var st GateState
	repaired, err := s.gate.Repair(ctx, a, func(ctx context.Context, remaining int64) (GateState, bool, error) {
		var err error
		if st, queued, err = s.gateState(ctx, a); err != nil {
			return GateState{}, false, err
		}
		rec = s.compare(a, st, remaining)
		return st, rec.Drift == drift, nil
	})
	switch {
	case errors.Is(err, ErrChanged) || err == nil && !repaired:
		rec.Outcome, rec.Note = ReconcileUnsettled, "the gate moved while the repair read the database; not repaired, try again"
		return rec, nil
	case err != nil:
		return rec, fmt.Errorf("repair gate of %s: %w", id, err)
	}
	if err := s.loadRanking(ctx, a, st, queued); err != nil {
		return rec, fmt.Errorf("repair the leaderboard of %s: %w", id, err)
	}
	rec.Repaired, rec.Outcome = true, ReconcileRepaired
	rec.Note = "the gate (and a red packet's leaderboard) was repaired from the database and the queue"
	return rec, nil
}

// compare is a reconciliation of a's gate, holding remaining units, with st.
func (s *Service) compare(a Activity, st GateState, remaining int64) Reconciliation {
	want := a.Stock - int64(len(st.Held))
	if a.Kind == KindRedPacket {
		want = int64(len(st.Shares))
	}
	return Reconciliation{Stock: a.Stock, GateRemaining: remaining, ExpectedRemaining: want,
		Held: int64(len(st.Held)), Drift: remaining - want}
}

// Activity returns an activity from the node's cache, or from the database. An id the database
// does not have is remembered for MissTTL: a crowd grabbing ids that do not exist costs a query
// per id, not per request. Errors: ErrNotFound, ErrBusy.
func (s *Service) Activity(ctx context.Context, id string) (Activity, error) {
	if a, ok := s.Known(id); ok {
		return a, nil
	}
	if !ValidID(id) {
		return Activity{}, ErrNotFound
	}
	if s.misses.known(id, time.Now()) {
		return Activity{}, fmt.Errorf("activity %s: %w", id, ErrNotFound)
	}
	a, err := s.store.Activity(ctx, id)
	switch {
	case err == nil:
		s.remember(a)
	case errors.Is(err, ErrNotFound):
		s.misses.add(id, time.Now())
	}
	return a, err
}

// remember caches a on this node.
func (s *Service) remember(a Activity) {
	s.acts.Store(a.ID, a)
	s.misses.forget(a.ID)
}

// Known returns an activity this node has read already, without asking the database: the edge
// uses it to apply an activity's own rate limits without a query per request.
func (s *Service) Known(id string) (Activity, bool) {
	v, ok := s.acts.Load(id)
	if !ok {
		return Activity{}, false
	}
	return v.(Activity), true
}

// Current returns the activities this node knows that have not ended, soonest start first: what
// the front page lists. It reads the node's cache (reloaded with ReloadActivities), never the
// database, so a crowd on the front page costs no queries.
func (s *Service) Current() []Activity {
	now := s.now()
	var out []Activity
	s.acts.Range(func(_, v any) bool {
		if a := v.(Activity); now.Before(a.EndAt) {
			out = append(out, a)
		}
		return true
	})
	slices.SortFunc(out, func(a, b Activity) int {
		if c := a.StartAt.Compare(b.StartAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// ReloadActivities reads the activities that have not ended into the node's cache, so that one
// created through another node is Known here within a reload, and drops from it those that ended
// more than MaxPayWindow and a week ago.
func (s *Service) ReloadActivities(ctx context.Context) error {
	acts, err := s.store.Activities(ctx, s.now())
	if err != nil {
		return fmt.Errorf("reload activities: %w", err)
	}
	for _, a := range acts {
		s.remember(a)
	}
	// What the node cached of activities long over goes: a shop that runs a sale a day keeps
	// two weeks of them, not every one it ever served.
	old := s.now().Add(-MaxPayWindow - archiveBacklog)
	s.acts.Range(func(k, v any) bool {
		if v.(Activity).EndAt.Before(old) {
			s.acts.Delete(k)
			s.soldOut.Delete(k)
			s.entries.Delete(k)
		}
		return true
	})
	return nil
}

// Remaining reports the units an activity has left, as the gate sees them, rebuilding the
// activity in the gate if the cache lost it.
// An archived activity's remaining units are the database's: its stock less what its orders
// hold.
func (s *Service) Remaining(ctx context.Context, id string) (int64, error) {
	n, err := s.gate.Remaining(ctx, id)
	if absent(err) {
		werr := s.warmOne(ctx, id)
		if errors.Is(werr, errArchived) {
			return s.remainingOfArchived(ctx, id)
		}
		if werr != nil {
			return 0, werr
		}
		n, err = s.gate.Remaining(ctx, id)
	}
	return n, err
}

// absent reports whether the gate's err says it does not hold the activity: lost (ErrUnloaded),
// or never given it, or archived (ErrNotFound, from a gate that knows only what it holds).
func absent(err error) bool { return errors.Is(err, ErrUnloaded) || errors.Is(err, ErrNotFound) }

// remainingOfArchived is an archived activity's remaining units, from the database.
func (s *Service) remainingOfArchived(ctx context.Context, id string) (int64, error) {
	a, err := s.Activity(ctx, id)
	if err != nil {
		return 0, err
	}
	c, err := s.store.Counts(ctx, id)
	if err != nil {
		return 0, err
	}
	return a.Stock - c.Created - c.Paid, nil
}

// Grab takes one unit of an activity admitted directly for a user, at the service's clock
// (req.Now is ignored). See Gate.Grab for the errors, and ErrNotLined's twin: a queue or lottery
// activity is refused with ErrInvalid (its grabs Join the line).
func (s *Service) Grab(ctx context.Context, req GrabRequest) (Grab, error) {
	if !ValidID(req.ActivityID) {
		return Grab{}, ErrNotFound
	}
	if len(req.Pass) > MaxPassLen {
		return Grab{}, fmt.Errorf("%w: the path token is not a pass", ErrChallengeRequired)
	}
	a, err := s.Activity(ctx, req.ActivityID)
	if err != nil {
		return Grab{}, err
	}
	if a.Lined() {
		return Grab{}, fmt.Errorf("%w: a %s activity's grabs join its line", ErrInvalid, a.Admission)
	}
	req.Now = s.now()
	return s.grab(ctx, req)
}

// grab asks the gate, rebuilding the activity in it if the cache lost it, and raises the local
// sold-out flag when the gate says so.
func (s *Service) grab(ctx context.Context, req GrabRequest) (Grab, error) {
	activityID := req.ActivityID
	g, err := s.gate.Grab(ctx, req)
	if absent(err) {
		// The cache lost the activity. Nothing can be sold from it while it is absent, so the
		// database and the queue say exactly what it must hold; Warm stores that unless another
		// node got there first. An archived activity has ended.
		werr := s.warmOne(ctx, activityID)
		if errors.Is(werr, errArchived) {
			return Grab{}, ErrEnded
		}
		if werr != nil {
			return Grab{}, werr
		}
		g, err = s.gate.Grab(ctx, req)
	}
	if errors.Is(err, ErrSoldOut) {
		s.flagSoldOut(activityID, time.Now().Add(s.soldOutTTL))
	}
	return g, err
}

// SoldOut reports whether the gate said recently that the activity has no unit left. It is a
// hint for turning the crowd away early; a false answer means "ask the gate".
func (s *Service) SoldOut(activityID string) bool {
	v, ok := s.soldOut.Load(activityID)
	return ok && time.Now().UnixNano() < v.(*atomic.Int64).Load()
}

func (s *Service) flagSoldOut(activityID string, until time.Time) {
	v, ok := s.soldOut.Load(activityID)
	if !ok {
		v, _ = s.soldOut.LoadOrStore(activityID, new(atomic.Int64))
	}
	v.(*atomic.Int64).Store(until.UnixNano())
}

// Order returns the order named by ref (its token or numeric id) if userID owns it. A grab still
// in the queue is reported as a PENDING order. Errors: ErrNotFound (also for someone else's order).
func (s *Service) Order(ctx context.Context, userID, ref string) (Order, error) {
	o, err := s.lookup(ctx, ref)
	if errors.Is(err, ErrNotFound) {
		var g Grab
		switch g, err = s.queue.Pending(ctx, ref); {
		case err == nil:
			o = pendingOrder(g)
		case errors.Is(err, ErrNotFound):
			// The worker may have placed it between the two reads.
			o, err = s.lookup(ctx, ref)
		}
	}
	if err != nil {
		return Order{}, err
	}
	if o.UserID != userID {
		return Order{}, ErrNotFound
	}
	return o, nil
}

func pendingOrder(g Grab) Order {
	return Order{Token: g.Token, ActivityID: g.ActivityID, UserID: g.UserID, Share: g.Share,
		AmountCents: g.AmountCents, Status: StatusPending, CreatedAt: g.At}
}

func (s *Service) lookup(ctx context.Context, ref string) (Order, error) {
	if ref == "" || len(ref) > MaxIDLen {
		return Order{}, ErrNotFound
	}
	if ref[0] >= '0' && ref[0] <= '9' {
		id, err := strconv.ParseInt(ref, 10, 64)
		if err != nil {
			return Order{}, ErrNotFound
		}
		return s.store.OrderByID(ctx, id)
	}
	return s.store.Order(ctx, ref)
}

// Pay pays userID's order ref. Paying twice is harmless; paying a cancelled, failed or expired
// order is ErrInvalidState, and so is paying a grab the worker has not turned into an order yet.
func (s *Service) Pay(ctx context.Context, userID, ref string) (Order, error) {
	o, err := s.Order(ctx, userID, ref)
	if err != nil {
		return Order{}, err
	}
	if o.Status == StatusPending {
		return o, fmt.Errorf("%w: the order is still being created; retry shortly", ErrInvalidState)
	}
	paid, err := s.store.Pay(ctx, o.Token, s.now())
	if err == nil && o.Status != StatusPaid {
		s.event("paid", 1)
	}
	return paid, err
}

// Cancel cancels userID's unpaid order ref and restocks its unit exactly once. Cancelling twice
// returns the cancelled order; cancelling a paid or failed order is ErrInvalidState.
func (s *Service) Cancel(ctx context.Context, userID, ref string) (Order, error) {
	o, err := s.Order(ctx, userID, ref)
	if err != nil {
		return Order{}, err
	}
	if o.Status == StatusPending {
		return o, fmt.Errorf("%w: the order is still being created; retry shortly", ErrInvalidState)
	}
	c, err := s.cancel(ctx, o.Token, "cancelled by the buyer")
	if err == nil && o.Status != StatusCancelled {
		s.event("cancelled", 1)
	}
	return c, err
}

// cancel moves an order to CANCELLED; the caller whose conditional update won gives the unit
// back to the gate. The database records the restock as owed in the same transaction, so a gate
// that fails after the commit (Redis away, the breaker open, the client hanging up, a crash)
// loses nothing: ReleaseOwed gives the unit back once the gate answers. The cancel itself has
// succeeded either way.
func (s *Service) cancel(ctx context.Context, token, reason string) (Order, error) {
	o, won, err := s.store.Cancel(ctx, token, reason, s.now())
	if err != nil || !won {
		return o, err
	}
	// Not on the request's context: a buyer who hangs up has still cancelled.
	if err := s.restock(context.WithoutCancel(ctx), o); err != nil {
		s.event("restock_deferred", 1)
	}
	return o, nil
}

// restock gives the unit of the cancelled order o back to the gate and records it given. A
// failure leaves the restock owed in the database; giving it back again is harmless (the gate
// restocks once per grab token).
func (s *Service) restock(ctx context.Context, o Order) error {
	g := Grab{Token: o.Token, ActivityID: o.ActivityID, UserID: o.UserID, Share: o.Share, AmountCents: o.AmountCents, At: o.CreatedAt}
	if err := s.gate.Release(ctx, g); err != nil {
		return fmt.Errorf("restock order %s: %w", o.Token, err)
	}
	if s.ranking != nil && s.isRedPacket(ctx, o.ActivityID) {
		// Best effort: a share left on the leaderboard is fixed by the next load; the
		// database fallback never counts a cancelled order.
		s.ranking.Remove(ctx, []Grab{g})
	}
	s.flagSoldOut(o.ActivityID, time.Time{})
	if s.restocks != nil {
		// Best effort: a lost announcement only makes the other nodes wait for their flags
		// to expire.
		s.restocks.Announce(ctx, o.ActivityID)
	}
	if err := s.store.Released(ctx, o.Token); err != nil {
		return fmt.Errorf("restock order %s: record it given back: %w", o.Token, err)
	}
	return nil
}

// ReleaseOwed gives back to the gate up to limit units of cancelled orders whose restock failed
// when they were cancelled, and returns how many it gave back. Every node's sweeper runs it; two
// giving back the same unit restock it once.
func (s *Service) ReleaseOwed(ctx context.Context, limit int) (int, error) {
	owed, err := s.store.Unreleased(ctx, limit)
	if err != nil {
		return 0, fmt.Errorf("owed restocks: %w", err)
	}
	n := 0
	for _, o := range owed {
		if err := s.restock(ctx, o); err != nil {
			return n, fmt.Errorf("owed restocks: %w", err)
		}
		n++
	}
	if n > 0 {
		s.event("restock_owed", n)
	}
	return n, nil
}

// SweepExpired cancels up to limit orders whose payment window has closed and restocks each
// exactly once, however many sweepers run at the same time. It returns how many it cancelled.
func (s *Service) SweepExpired(ctx context.Context, limit int) (int, error) {
	expired, err := s.store.Expired(ctx, s.now(), limit)
	if err != nil {
		return 0, fmt.Errorf("sweep: %w", err)
	}
	n := 0
	for _, o := range expired {
		got, err := s.cancel(ctx, o.Token, ReasonExpired)
		switch {
		case errors.Is(err, ErrInvalidState): // paid meanwhile, or cancelled by a racing sweeper
		case err != nil:
			return n, fmt.Errorf("sweep: %w", err)
		case got.Status == StatusCancelled:
			n++
		}
	}
	return n, nil
}

// Stats reports an activity's gate and database counters.
func (s *Service) Stats(ctx context.Context, id string) (Stats, error) {
	st, err := s.GateStats(ctx, id)
	if err != nil {
		return Stats{}, err
	}
	// The queue first: a grab leaves it only after its order is committed, so counts read after
	// a depth of zero hold every order (read the other way round, the last batch could slip
	// between the two readings and be in neither).
	depth, err := s.queue.Depth(ctx, id)
	if err != nil {
		return Stats{}, err
	}
	c, err := s.store.Counts(ctx, id)
	if err != nil {
		return Stats{}, err
	}
	st.Orders, st.Created, st.Paid, st.Cancelled, st.Failed = c.Orders, c.Created, c.Paid, c.Cancelled, c.Failed
	st.Expired = c.Expired
	st.PendingQueue, st.DeadLetters = depth, c.DeadLetters
	return st, nil
}

// Counts is the part of Stats the database knows: the activity's orders by state and its dead
// letters, what a node whose gate is away still answers.
func (s *Service) Counts(ctx context.Context, id string) (Counts, error) {
	if _, err := s.Activity(ctx, id); err != nil {
		return Counts{}, err
	}
	return s.store.Counts(ctx, id)
}

// GateStats is the part of Stats the gate knows, without the database's counts (which scan the
// activity's orders): what a node under strain still answers.
func (s *Service) GateStats(ctx context.Context, id string) (Stats, error) {
	a, err := s.Activity(ctx, id)
	if err != nil {
		return Stats{}, err
	}
	rem, err := s.Remaining(ctx, id)
	if err != nil {
		return Stats{}, err
	}
	st := Stats{Stock: a.Stock, Remaining: rem, Grabbed: a.Stock - rem}
	if a.Lined() && s.line != nil {
		ls, err := s.line.State(ctx, a.ID)
		if err != nil {
			return Stats{}, err
		}
		st.Line = lineStats(a, ls)
	}
	return st, nil
}

// Gauge is one activity's live numbers for the metrics: what the gate has left and what the
// queue still holds.
type Gauge struct {
	ActivityID string
	Remaining  int64
	Queued     int64
	Line       *LineStats // a queue or lottery activity's line; nil for direct admission
}

// Gauges reads the gate and the queue for every activity this node knows that has not ended.
// An activity the gate or the queue cannot answer for is left out.
func (s *Service) Gauges(ctx context.Context) []Gauge {
	var out []Gauge
	now := s.now()
	s.acts.Range(func(_, v any) bool {
		a := v.(Activity)
		if !now.Before(a.EndAt) {
			return true
		}
		rem, err := s.gate.Remaining(ctx, a.ID)
		if err != nil {
			return true
		}
		depth, err := s.queue.Depth(ctx, a.ID)
		if err != nil {
			return true
		}
		g := Gauge{ActivityID: a.ID, Remaining: rem, Queued: depth}
		if a.Lined() && s.line != nil {
			if st, err := s.line.State(ctx, a.ID); err == nil {
				g.Line = lineStats(a, st)
			}
		}
		out = append(out, g)
		return true
	})
	return out
}
