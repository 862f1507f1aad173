package sale

import (
	"context"
	"sync"
	"time"
)

// The core of a sale is the Service: its activities (activities.go, the node's one activity
// cache), a buyer's click (grab.go: a unit or a place in the line), orders (orders.go: look up,
// pay, cancel, sweep, the durable restock), the node's sold-out flag (soldout.go), the gate's
// recovery (recovery.go: warm, rebuild, the revisions it is owed; reconcile.go), the archive
// and the counters. Each feature beside it is a service of its own, on its own ports, built by
// the node only when what it needs is configured: Operator (operate.go, revise.go: the changes
// that make revisions), Payments (payments.go), Outbox (events.go), Lines (line.go, drain.go),
// Boards (leaderboard.go), Challenges (challenge.go), Blocks (block.go) and Audit (audit.go).
// The ports are in ports.go.

// Deps is what the core Service runs on, each port the part of its adapter the service needs (a
// gate adapter is both Inventory and Passes, the database every store). The first five are
// required; a nil optional port turns off what its comment says.
type Deps struct {
	Inventory  Inventory
	Passes     Passes
	Backlog    Backlog
	Activities ActivityStore
	Orders     OrderStore
	Now        func() time.Time // the clock; nil: time.Now

	Line    Line    // the waiting lines of queue and lottery activities; nil: none can be created
	Ranking Ranking // red packets' leaderboards beside the gate; nil: none (the database answers)

	// Restocks announces every restock to the other nodes and hears theirs (see ListenRestocks);
	// nil: this node is the only one. SoldOutTTL is how long the node trusts a sold-out answer of
	// the gate: with announcements it only bounds how long a missed one keeps a unit unsold.
	// Zero: SoldOutTTL.
	Restocks   Restocks
	SoldOutTTL time.Duration

	// ReconcilePause is how long a reconcile waits between its two readings (zero: 100 ms): a
	// grab in flight lands meanwhile, and a drift it caused does not last.
	ReconcilePause time.Duration

	// Events is told of orders paid and cancelled by their buyers ("paid", "cancelled") and of
	// restocks deferred and given back ("restock_deferred", "restock_owed"), for the metrics;
	// nil: nobody.
	Events func(name string, n int)
}

// DepsOf is the Deps of a service on one gate, one queue and one database, each adapter giving
// every port it implements; the optional ports are left for the caller to set.
func DepsOf(g Gate, q Queue, db Store) Deps {
	return Deps{Inventory: g, Passes: g, Backlog: q, Activities: db, Orders: db}
}

// Service runs sales on its Deps. It is what the HTTP layer and the workers call. Besides its
// dependencies it holds only caches a node may lose at any time: its activities, the local
// sold-out flags and its copy of the blacklist.
type Service struct {
	inventory  Inventory
	passes     Passes
	backlog    Backlog
	activities ActivityStore
	orders     OrderStore
	now        func() time.Time
	line       Line
	ranking    Ranking
	restocks   Restocks
	event      func(name string, n int)

	soldOutTTL     time.Duration
	reconcilePause time.Duration

	// acts caches the activities this node has read: they never change once created.
	acts   sync.Map // id -> Activity
	misses *misses  // ids the database said it does not have, for a moment

	// soldOut remembers, per activity, until when the gate last said it was sold out: the local
	// sold-out flag that turns the crowd away before it costs a token check or a gate call.
	soldOut sync.Map // activity id -> *soldOutFlag

	warming    flights  // the rebuilds of activities the gate lost, one at a time per activity
	refreshing flights  // the reads of activities the gate holds another revision of, likewise
	entries    sync.Map // activity id -> []string, a drawn line's entries, sorted (they never change)
	// archiving are what the features keep of an activity before it is archived (beforeArchive).
	archiving []func(context.Context, Activity) error
}

// SoldOutTTL is how long a node trusts a sold-out answer without asking the gate again, when
// restocks are not announced: the longest a unit restocked through another node waits before
// this node sells it.
const SoldOutTTL = time.Second

// NewService returns a Service running on d.
func NewService(d Deps) *Service {
	s := &Service{inventory: d.Inventory, passes: d.Passes, backlog: d.Backlog, activities: d.Activities,
		orders: d.Orders, now: d.Now, line: d.Line, ranking: d.Ranking, restocks: d.Restocks, event: d.Events,
		soldOutTTL: d.SoldOutTTL, reconcilePause: d.ReconcilePause, misses: newMisses(maxMisses)}
	if s.now == nil {
		s.now = time.Now
	}
	if s.event == nil {
		s.event = func(string, int) {}
	}
	if s.soldOutTTL == 0 {
		s.soldOutTTL = SoldOutTTL
	}
	if s.reconcilePause == 0 {
		s.reconcilePause = 100 * time.Millisecond
	}
	return s
}

// ListenRestocks clears the local sold-out flag of every activity another node restocks, until
// ctx ends.
func (s *Service) ListenRestocks(ctx context.Context) error {
	if s.restocks == nil {
		return nil
	}
	return s.restocks.Listen(ctx, func(activityID string) { s.lowerSoldOut(activityID) })
}

// Now returns the service's clock reading.
func (s *Service) Now() time.Time { return s.now() }

// Features are the services beside the core one, as a node builds them: each nil when the node
// has it not (see each type).
type Features struct {
	Operator   *Operator
	Payments   *Payments
	Outbox     *Outbox
	Lines      *Lines
	Boards     *Boards
	Challenges *Challenges
	Blocks     *Blocks
	Audit      *Audit
	// Reservations are the reservation sales' reservations, Forecasts their crowd forecasts.
	Reservations *Reservations
	Forecasts    *Forecasts
}
