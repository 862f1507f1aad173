package sale

import (
	"context"
	"sync"
	"time"
)

// The use cases of a sale each have a file: activities.go (create one, the node's one activity
// cache), grab.go (a buyer's click: a unit or a place in the line), orders.go (look up, pay,
// cancel, sweep, the durable restock), recovery.go (warm and rebuild the gate, reconcile it),
// archive.go, stats.go, and the features beside them (line.go, leaderboard.go, challenge.go,
// block.go). The ports the service needs are in ports.go.

// Deps is what a Service runs on, each port the part of its adapter the service needs (a gate
// adapter is both Inventory and Passes, the database every store). The first six are required;
// a nil optional port turns its feature off, as its comment says.
type Deps struct {
	Inventory  Inventory
	Passes     Passes
	Backlog    Backlog
	Activities ActivityStore
	Orders     OrderStore
	Blocks     BlockStore
	Audit      AuditStore       // the admin actions' log; nil: none (Audit answers ErrBusy)
	Outbox     EventStore       // the outbox of order events; nil: none (Deliveries answers ErrBusy)
	Payments   PaymentStore     // payments through a provider; nil: none (StartPayment answers ErrBusy)
	Now        func() time.Time // the clock; nil: time.Now

	Line       Line        // the waiting lines of queue and lottery activities; nil: none can be created
	Ranking    Ranking     // red packets' leaderboards beside the gate; nil: none
	Leaders    LeaderStore // the database's leaderboards, when Ranking cannot answer; nil: none
	Challenges Challenges  // nil: every challenge asked for is ErrBusy

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
	return Deps{Inventory: g, Passes: g, Backlog: q, Activities: db, Orders: db, Blocks: db, Audit: db, Outbox: db, Payments: db}
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
	blocks     BlockStore
	audit      AuditStore
	outbox     EventStore
	payments   PaymentStore
	now        func() time.Time
	line       Line
	ranking    Ranking
	leaders    LeaderStore
	challenges Challenges
	restocks   Restocks
	event      func(name string, n int)

	soldOutTTL     time.Duration
	reconcilePause time.Duration

	// acts caches the activities this node has read: they never change once created.
	acts   sync.Map // id -> Activity
	misses *misses  // ids the database said it does not have, for a moment

	// soldOut remembers, per activity, until when the gate last said it was sold out: the local
	// sold-out flag that turns the crowd away before it costs a token check or a gate call.
	soldOut sync.Map // activity id -> *atomic.Int64 (Unix nanoseconds, real time)

	blocked Blocklist // this node's copy of the blacklist

	warming    flights  // the rebuilds of activities the gate lost, one at a time per activity
	refreshing flights  // the reads of activities the gate holds another revision of, likewise
	entries    sync.Map // activity id -> []string, a drawn line's entries, sorted (they never change)
}

// SoldOutTTL is how long a node trusts a sold-out answer without asking the gate again, when
// restocks are not announced: the longest a unit restocked through another node waits before
// this node sells it.
const SoldOutTTL = time.Second

// NewService returns a Service running on d.
func NewService(d Deps) *Service {
	s := &Service{inventory: d.Inventory, passes: d.Passes, backlog: d.Backlog, activities: d.Activities,
		orders: d.Orders, blocks: d.Blocks, audit: d.Audit, outbox: d.Outbox, payments: d.Payments, now: d.Now, line: d.Line, ranking: d.Ranking,
		leaders: d.Leaders, challenges: d.Challenges, restocks: d.Restocks, event: d.Events,
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
	return s.restocks.Listen(ctx, func(activityID string) { s.flagSoldOut(activityID, time.Time{}) })
}

// Now returns the service's clock reading.
func (s *Service) Now() time.Time { return s.now() }
