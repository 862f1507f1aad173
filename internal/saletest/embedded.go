package saletest

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/memory"
	"seckill/internal/sale"
	"seckill/internal/sqlstore"
	"seckill/internal/worker"
)

var quiet = slog.New(slog.DiscardHandler)

// Sink is the outbox sink of the stores the suites open: every order change writes its event
// for it.
const Sink = "suite"

// Embedded wires the single-binary mode on t's temp dir: memory gate and queue on a SQLite journal and store,
// with a real worker consuming in the background.
func Embedded(t testing.TB, clock *Clock) Env {
	return EmbeddedOn(t, clock, "sqlite:"+filepath.Join(t.TempDir(), "db"))
}

// EmbeddedOn is Embedded on the database named by dsn (its store and, for SQLite, the queue file
// beside it; for MySQL and PostgreSQL the queue table in it).
func EmbeddedOn(t testing.TB, clock *Clock, dsn string) Env {
	ctx := context.Background()
	store, err := sqlstore.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	store.EmitTo(Sink) // every suite's orders write their events, as a node with a webhook would
	journal, err := sqlstore.OpenJournal(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := sqlstore.OpenLineJournal(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	line, err := memory.OpenLine(ctx, lines, store.Activity)
	if err != nil {
		t.Fatal(err)
	}
	queue := memory.NewQueue(journal, 50*time.Millisecond, 0)
	// As the binary wires it: the gate's commits place the orders, through the faulty store, and
	// journal for the worker what it refuses.
	faults := newFaults()
	placing := memory.NewPlacing(faultyStore{store, faults}, journal, queue.Wake, quiet)
	gate := memory.NewGate(placing, 64, nil)
	ranking := memory.NewRanking(ExactMax)
	answers := NewAnswers(memory.NewChallenges(1 << 16))
	d := sale.DepsOf(gate, queue, store)
	d.Ranking, d.Line, d.Challenges = ranking, line, answers
	env := start(t, clock, faults, placing.OnPlaced, d, gate, queue, store, line.Close, lines.Close, gate.Close, journal.Close, store.Close)
	env.Answers = answers
	env.Hot = func(id string) []string {
		ctx := context.Background()
		var hot []string
		if _, err := gate.Remaining(ctx, sale.Activity{ID: id}); err == nil { // the memory gate knows its activities by id
			hot = append(hot, "gate")
		}
		if _, _, err := ranking.Usage(ctx, id); err == nil {
			hot = append(hot, "leaderboard")
		}
		if st, err := line.State(ctx, id); err == nil && st.Joined > 0 {
			hot = append(hot, "line")
		}
		return hot
	}
	return env
}

// drainWithin bounds a wait for a queue to drain: a liveness bound, not a speed test. It was
// 10 s until a full race-enabled suite on two busy cores left a 3,000-share rain with 408 grabs
// unplaced at 10 s (TestLeaderboard/Embedded/Approximate takes 13 s alone).
const drainWithin = 60 * time.Second

// ExactMax is how many shares a test activity's leaderboard keeps exactly; beyond it the
// leaderboard is a histogram.
const ExactMax = 2_000

// drainer returns a Drain that waits until the queue holds none of an activity's grabs. A queue
// that is briefly unreachable (a Redis that has just restarted: the client redials within a
// second) is asked again; it must answer, and be empty, within drainWithin.
func drainer(t testing.TB, queue sale.Queue, store sale.Store) func(string) {
	return func(id string) {
		a, err := store.Activity(context.Background(), id)
		if err != nil {
			t.Fatalf("drain %s: %v", id, err)
		}
		deadline := time.Now().Add(drainWithin)
		for {
			n, err := queue.Depth(context.Background(), a)
			if err == nil && n == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("queue of %s still holds %d grabs after %s (last error: %v)", id, n, drainWithin, err)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}

// start runs a service on d (the Deps of gate, queue and store) at clock, its gate and store
// breakable by faults, with a worker in the background; onPlaced, when not nil, registers the
// service's OrdersPlaced for the orders the gate's commits place themselves. When t ends it stops
// the worker and calls closers in order.
func start(t testing.TB, clock *Clock, faults *Faults, onPlaced func(func([]sale.Placement)), d sale.Deps, gate sale.Gate,
	queue sale.Queue, store sale.Store, closers ...func() error) Env {
	faulty := faultyGate{gate, faults}
	d.Inventory, d.Passes, d.Now = faulty, faulty, clock.Now
	// The tests' gates stand still between steps: the reconcile need not wait long for grabs.
	d.ReconcilePause = 5 * time.Millisecond
	if leaders, ok := store.(sale.LeaderStore); ok {
		d.Leaders = leaders
	}
	svc := sale.NewService(d)
	run, stop := context.WithCancel(context.Background())
	if onPlaced != nil {
		onPlaced(func(ps []sale.Placement) { svc.OrdersPlaced(run, ps) })
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		(&worker.Worker{Queue: queue, Store: faultyStore{store, faults}, Log: quiet, Batch: 16,
			Placed: func(ps []sale.Placement) { svc.OrdersPlaced(run, ps) }}).Run(run)
	})
	t.Cleanup(func() {
		stop()
		wg.Wait()
		for _, c := range closers {
			c()
		}
	})
	return Env{Service: svc, Store: store, Queue: queue, Clock: clock, Drain: drainer(t, queue, store), Faults: faults}
}

// Faults break an Env's gate on demand: what the service must survive when the gate fails
// after the database has committed (Redis away between a cancel and its restock).
type Faults struct {
	releases  atomic.Int64
	revisions atomic.Int64
	repair    atomic.Pointer[func()]
	warm      atomic.Pointer[func()]

	mu          sync.Mutex
	unplaceable map[string]bool // users whose grabs the database refuses for good
}

// Unplaceable makes the database refuse, for good, every batch with a grab of user in it, as it
// refuses a grab of an activity that does not exist: the worker must dead-letter that grab alone.
func (f *Faults) Unplaceable(user string) {
	f.mu.Lock()
	f.unplaceable[user] = true
	f.mu.Unlock()
}

func newFaults() *Faults { return &Faults{unplaceable: map[string]bool{}} }

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
	return s.Store.PlaceOrders(ctx, gs)
}

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
