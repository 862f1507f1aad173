package saletest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"seckill/internal/sale"
)

// Faults break an Env's gate on demand: what the service must survive when the gate fails
// after the database has committed (Redis away between a cancel and its restock).
type Faults struct {
	releases   atomic.Int64
	revisions  atomic.Int64
	rankings   atomic.Int64
	replies    atomic.Int64
	admissions atomic.Int64
	repair     atomic.Pointer[func()]
	warm       atomic.Pointer[func()]
	next       atomic.Pointer[func()]

	mu          sync.Mutex
	unplaceable map[string]bool // users whose grabs the database refuses for good
	failGrab    map[string]bool // users whose next grab the gate fails
}

// Unplaceable makes the database refuse, for good, every batch with a grab of user in it, as it
// refuses a grab of an activity that does not exist: the worker must dead-letter that grab alone.
func (f *Faults) Unplaceable(user string) {
	f.mu.Lock()
	f.unplaceable[user] = true
	f.mu.Unlock()
}

// FailGrabsOf makes the gate fail the next grab of each of users with ErrBusy, taking nothing:
// a link reset that fails some grabs of a drainer's batch while the rest win.
func (f *Faults) FailGrabsOf(users ...string) {
	f.mu.Lock()
	for _, u := range users {
		f.failGrab[u] = true
	}
	f.mu.Unlock()
}

// NewFaults returns faults that break nothing until told to.
func NewFaults() *Faults { return &Faults{unplaceable: map[string]bool{}, failGrab: map[string]bool{}} }

// Gate returns g with f's faults: a node's gate adapter, below its guard.
func (f *Faults) Gate(g sale.Gate) sale.Gate { return faultyGate{g, f} }

// Line returns l with f's faults: a node's waiting lines, below their guard.
func (f *Faults) Line(l sale.Line) sale.Line { return faultyLine{l, f} }

// LoseAdmissionRecords makes the next n records of admitted tickets fail with ErrBusy, without
// recording them: a drainer that dies, or loses the line's server, between the grabs it made for
// the tickets at the head and the record of their outcomes.
func (f *Faults) LoseAdmissionRecords(n int64) { f.admissions.Store(n) }

type faultyLine struct {
	sale.Line
	f *Faults
}

// AfterNext makes the next read of a line's head run fn once it has read it: what an operator
// does between a drainer's reading of the gate and its grabs.
func (f *Faults) AfterNext(fn func()) { f.next.Store(&fn) }

func (l faultyLine) Next(ctx context.Context, activityID string, n int) (int64, int64, []sale.Ticket, error) {
	from, to, ts, err := l.Line.Next(ctx, activityID, n)
	if fn := l.f.next.Swap(nil); fn != nil {
		(*fn)()
	}
	return from, to, ts, err
}

func (l faultyLine) Admit(ctx context.Context, activityID string, from, to int64, ts []sale.Ticket, rate float64) error {
	if take(&l.f.admissions) {
		return fmt.Errorf("%w: the test lost the record of the admitted tickets", sale.ErrBusy)
	}
	return l.Line.Admit(ctx, activityID, from, to, ts, rate)
}

// Ranking returns r with f's faults: a node's leaderboards, below its guard.
func (f *Faults) Ranking(r sale.Ranking) sale.Ranking { return faultyRanking{r, f} }

// FailRankings makes the next n changes of the leaderboards (shares added, put back or taken
// off) fail with ErrBusy, without calling them: Redis out of reach between a placement and its
// share's place on the board, or a cancel and its share's removal.
func (f *Faults) FailRankings(n int64) { f.rankings.Store(n) }

type faultyRanking struct {
	sale.Ranking
	f *Faults
}

func (r faultyRanking) Add(ctx context.Context, gs []sale.Grab) error {
	if take(&r.f.rankings) {
		return fmt.Errorf("%w: the test failed a leaderboard's add", sale.ErrBusy)
	}
	return r.Ranking.Add(ctx, gs)
}

func (r faultyRanking) Restore(ctx context.Context, gs []sale.Grab) error {
	if take(&r.f.rankings) {
		return fmt.Errorf("%w: the test failed a leaderboard's restore", sale.ErrBusy)
	}
	return r.Ranking.Restore(ctx, gs)
}

func (r faultyRanking) Remove(ctx context.Context, gs []sale.Grab) error {
	if take(&r.f.rankings) {
		return fmt.Errorf("%w: the test failed a leaderboard's removal", sale.ErrBusy)
	}
	return r.Ranking.Remove(ctx, gs)
}

// Store returns s with f's faults: a node's database, below its guard.
func (f *Faults) Store(s sale.Store) sale.Store { return faultyStore{s, f} }

type faultyStore struct {
	sale.Store
	f *Faults
}

func (s faultyStore) PlaceOrders(ctx context.Context, gs []sale.Grab) ([]sale.Placement, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	for _, g := range gs {
		if s.f.unplaceable[g.UserID] {
			return nil, fmt.Errorf("%w: the test refuses grab %s", sale.ErrUnplaceable, g.Token)
		}
	}
	ps, err := s.Store.PlaceOrders(ctx, gs)
	if err == nil && take(&s.f.replies) {
		return nil, errors.New("the test lost the database's reply: the orders were placed")
	}
	return ps, err
}

// LosePlacementReplies makes the next n placements of orders that commit answer with an error
// all the same: a reply lost after the commit (a placement cut short that committed anyway, a
// worker killed between its commit and what it tells). Whoever places them again finds them
// placed.
func (f *Faults) LosePlacementReplies(n int64) { f.replies.Store(n) }

// DuringRepair makes the next repair of the gate run f while it reads the database: traffic that
// lands between a reconcile's reading and its writing. nil takes it back.
func (f *Faults) DuringRepair(fn func()) {
	if fn == nil {
		f.repair.Store(nil)
		return
	}
	f.repair.Store(&fn)
}

// BeforeWarm makes the next Warm of the gate run fn first, after its caller read the state it
// stores: what another node does between a rebuild's reading and its writing.
func (f *Faults) BeforeWarm(fn func()) { f.warm.Store(&fn) }

// FailReleases makes the next n releases of the gate fail with ErrBusy, without calling it.
func (f *Faults) FailReleases(n int64) { f.releases.Store(n) }

// FailRevisions makes the next n revisions given to the gate fail with ErrBusy, without
// calling it.
func (f *Faults) FailRevisions(n int64) { f.revisions.Store(n) }

// take reports whether a call counted by n is to fail, counting it.
func take(n *atomic.Int64) bool {
	for {
		v := n.Load()
		if v <= 0 {
			return false
		}
		if n.CompareAndSwap(v, v-1) {
			return true
		}
	}
}

type faultyGate struct {
	sale.Gate
	f *Faults
}

// Load runs the repair hook too: a reconcile that loads the gate whole, without Repair's check,
// meets the same traffic.
func (g faultyGate) Load(ctx context.Context, a sale.Activity, st sale.GateState) error {
	if fn := g.f.repair.Swap(nil); fn != nil {
		(*fn)()
	}
	return g.Gate.Load(ctx, a, st)
}

func (g faultyGate) Repair(ctx context.Context, a sale.Activity, read func(ctx context.Context, remaining int64) (sale.GateState, bool, error)) (bool, error) {
	if fn := g.f.repair.Swap(nil); fn != nil {
		inner := read
		read = func(ctx context.Context, remaining int64) (sale.GateState, bool, error) {
			(*fn)()
			return inner(ctx, remaining)
		}
	}
	return g.Gate.Repair(ctx, a, read)
}

func (g faultyGate) Warm(ctx context.Context, a sale.Activity, st sale.GateState) (bool, error) {
	if fn := g.f.warm.Swap(nil); fn != nil {
		(*fn)()
	}
	return g.Gate.Warm(ctx, a, st)
}

func (g faultyGate) Grab(ctx context.Context, a sale.Activity, r sale.GrabRequest) (sale.Grab, error) {
	g.f.mu.Lock()
	fail := g.f.failGrab[r.UserID]
	delete(g.f.failGrab, r.UserID)
	g.f.mu.Unlock()
	if fail {
		return sale.Grab{}, fmt.Errorf("%w: the test fails this grab of %s", sale.ErrBusy, r.UserID)
	}
	return g.Gate.Grab(ctx, a, r)
}

func (g faultyGate) Release(ctx context.Context, a sale.Activity, gr sale.Grab) error {
	if take(&g.f.releases) {
		return fmt.Errorf("%w: the test refuses this release", sale.ErrBusy)
	}
	return g.Gate.Release(ctx, a, gr)
}

func (g faultyGate) Revise(ctx context.Context, a sale.Activity, add int64) error {
	if take(&g.f.revisions) {
		return fmt.Errorf("%w: the test refuses this revision", sale.ErrBusy)
	}
	return g.Gate.Revise(ctx, a, add)
}
