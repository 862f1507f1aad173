package sale

import (
	"context"
	"time"
)

// Gate is the stock gate: its Inventory, the Passes a grab spends and the Waves a reservation
// sale's grab is checked against, in the same atomic step that takes its unit. It is what an
// adapter of the gate implements (embedded.Gate, redisstore.Gate).
type Gate interface {
	Inventory
	Passes
	Waves
}

// Inventory is the stock of the gate: the one atomic step that checks the sale window, the
// per-user limit and the stock, takes a unit, records the buyer and enqueues the grab. An
// implementation answers only once the grab is durable (group-committed to the embedded journal,
// or appended to a Redis stream by the same script that took the unit), so an acknowledged grab
// is never lost.
//
// Every call names the activity whole: the service holds the node's one copy of each activity
// (they never change once created), so a gate keeps none of its own.
type Inventory interface {
	// Load makes activity a sellable with the holdings of st, replacing whatever the gate knew of
	// it. It is how a new activity is loaded; nothing may be selling it yet. Every write of an
	// activity's state (Load, Warm, Repair) records a.Revision as the revision the gate holds.
	Load(ctx context.Context, a Activity, st GateState) error

	// Warm loads a with st unless the gate holds a already (another node loaded it, or the cache
	// outlived this process), atomically with that check, and reports whether it loaded. It is
	// how a node starts: it never overwrites units another node is selling. A gate that holds
	// only part of a (a Redis shard of a sharded stock lost) gets the missing part back, with its
	// holdings and none of the units it had, which a reconcile at rest returns.
	Warm(ctx context.Context, a Activity, st GateState) (bool, error)

	// Repair makes the gate hold what read returns for a, provided nothing moved in the gate
	// while read ran: read is given the units the gate had when Repair began, and says whether
	// to repair. A stock on one slot is replaced whole; a sharded stock has its count corrected on
	// its first shard (each shard's holdings are its own). Repair reports whether it repaired.
	// The gate may hold an older revision than a (a replica promoted that had not seen the last
	// change): the repair brings it to a's. Errors: ErrChanged (a grab or a release came
	// meanwhile, or the gate holds a later revision than a: try again at rest), ErrBusy.
	Repair(ctx context.Context, a Activity, read func(ctx context.Context, remaining int64) (GateState, bool, error)) (bool, error)

	// Grab takes one unit for r.UserID. A request repeating an idempotency key already granted
	// returns the first grab again and takes nothing. Otherwise a pass in r.Pass is spent first:
	// it must be one issued to r.UserID for this activity and not expired at r.Now, and a grab
	// without one is refused if the activity requires a challenge; a gate that checks
	// r.UserRate refuses a grab over it first, with Throttled. Errors: ErrNotFound,
	// ErrNotStarted, ErrEnded, ErrChallengeRequired, ErrAlreadyBought, ErrSoldOut, ErrStale (the
	// gate holds another revision than a.Revision; nothing was taken), ErrBusy. r.ActivityID is
	// a.ID.
	Grab(ctx context.Context, a Activity, r GrabRequest) (Grab, error)

	// Revise makes the gate hold revision a.Revision of a, which adds add units to its stock (0
	// for a change the gate keeps nothing of, such as the sale's end), provided it holds
	// revision a.Revision-1; at a.Revision or later it does nothing, so a revision given twice
	// counts once. A gate that holds a only in part (a Redis shard lost) gives the parts it holds
	// and answers ErrUnloaded. Errors: ErrChanged (the gate holds an older revision: the ones
	// between come first), ErrUnloaded or ErrNotFound (it does not hold a, or not all of it),
	// ErrBusy.
	Revise(ctx context.Context, a Activity, add int64) error

	// Release gives the unit of a cancelled grab back: the stock (or the red-packet share)
	// returns and the buyer may grab again. It is idempotent per grab token: a grab that holds
	// nothing in the gate (released before, or loaded without it) gives nothing back. g.ActivityID
	// is a.ID. Errors: ErrUnloaded or ErrNotFound (the gate does not hold a: the unit must wait
	// for a rebuild, which may count it held), ErrBusy.
	Release(ctx context.Context, a Activity, g Grab) error

	// Remaining reports the units the gate still has for a. Errors: ErrNotFound (or ErrUnloaded:
	// the gate does not hold a), ErrBusy.
	Remaining(ctx context.Context, a Activity) (int64, error)

	// Drop forgets everything the gate holds for an activity (its stock, holdings, answers,
	// grab records, streams): its hot state, archived once the sale is over and drained (see
	// Service.Archive). Dropping what is not there is no error.
	Drop(ctx context.Context, a Activity) error
}

// Passes are the one-time path tokens a solved challenge hands out, kept beside the stock: a
// grab spends its pass in the step that takes its unit (Inventory.Grab).
type Passes interface {
	// IssuePass stores, at now, a one-time pass (a path token) that lets userID grab from a
	// until expires. A grab that carries a pass spends it whatever its outcome, and a grab from
	// an activity that requires a challenge must carry one. Errors: ErrNotFound, ErrBusy.
	IssuePass(ctx context.Context, a Activity, userID, token string, now, expires time.Time) error

	// SpendPass spends, at now, a pass token that userID shows to join a line (a grab spends its
	// own): it must be one issued to userID for this activity and not expired; it is spent then,
	// whatever the join comes to, and a pass shown by someone else is left to its owner. Errors:
	// ErrChallengeRequired (no such pass, or spent, expired or someone else's), ErrNotFound,
	// ErrBusy.
	SpendPass(ctx context.Context, a Activity, userID, token string, now time.Time) error
}

// Waves are a reservation sale's reservers with their waves, kept beside the stock: a grab from
// such a sale is checked against its buyer's wave in the step that takes its unit
// (Inventory.Grab, Activity.Admit). The set is the database's, copied in once the reservations
// have closed (Reservations.OpenWaves), and copied again whenever the gate lost it; it never
// changes once whole. A load of the activity (Inventory.Load, Warm) leaves it; Drop forgets it.
type Waves interface {
	// HoldWaves adds reservers of a to the gate's set, user id -> wave (from 1). Adding one
	// again is harmless. Errors: ErrBusy.
	HoldWaves(ctx context.Context, a Activity, waves map[string]int64) error

	// SealWaves records that the gate holds every one of a's n reservers. Until then every grab
	// of a is refused with a WaveNotOpen of no wave; from then a grab of a user not in the set
	// with ErrNotReserved, and of one whose wave has not opened with WaveNotOpen. Errors: ErrBusy.
	SealWaves(ctx context.Context, a Activity, n int64) error

	// WavesSealed reports whether the gate holds a's whole set: false once it lost any of it (a
	// Redis shard's keys). Errors: ErrBusy.
	WavesSealed(ctx context.Context, a Activity) (bool, error)
}

// Delivery is a grab handed to a worker. It stays in the queue until acknowledged, and is
// delivered again (to this or another worker) if the worker dies first.
type Delivery struct {
	ID       string
	Grab     Grab
	Attempts int // deliveries so far, this one included
}

// Queue carries acknowledged grabs from the gate to the workers that turn them into orders: what
// an adapter of the queue implements. The workers consume it (Consumer), the service reads what
// is still in it (Backlog).
type Queue interface {
	Consumer
	Backlog
}

// Consumer is the queue as the workers see it.
type Consumer interface {
	// Receive waits until at least one grab is ready (or ctx ends) and returns up to max.
	Receive(ctx context.Context, max int) ([]Delivery, error)

	// Ack removes processed deliveries from the queue.
	Ack(ctx context.Context, ds []Delivery) error

	// Bury takes deliveries the workers gave up on out of the queue, keeping them where a person
	// can look (a dead-letter stream), and acknowledges them.
	Bury(ctx context.Context, ds []Delivery, reason string) error
}

// Backlog is the queue as the service reads it: the grabs acknowledged and not yet orders.
type Backlog interface {

	// Pending returns the queued grab with this token. Errors: ErrNotFound.
	Pending(ctx context.Context, token string) (Grab, error)

	// Depth reports the grabs of activity a not yet acknowledged by a worker, on every stream
	// a's stock is split over (a.StockShards, not what the cache says: it may have lost it).
	Depth(ctx context.Context, a Activity) (int64, error)

	// Unacked returns the grabs of activity a not yet acknowledged by a worker: with the
	// database's orders they are what the gate must hold.
	Unacked(ctx context.Context, a Activity) ([]Grab, error)
}

// Placement is the database's answer to one grab: the order it now has for the grab's token.
type Placement struct {
	Order Order
	New   bool // this call created the order (false: it existed, e.g. a redelivery)
}

// Store is the database: the record of activities and orders, and the final guard. Its unique
// keys and conditional updates keep orders within stock and per-user limits even if a gate lies.
// It is what the database's adapter implements (sqlstore.Store); its users each take the part
// they need.
type Store interface {
	ActivityStore
	OrderStore
	Placer
	BlockStore
	AuditStore
	EventStore
	PaymentStore
	ReservationStore
	ForecastStore

	// Ping reports whether the database answers.
	Ping(ctx context.Context) error
}

// ActivityStore keeps the activities.
type ActivityStore interface {
	// CreateActivity stores a and, for a red packet, its shares. Errors: ErrExists.
	CreateActivity(ctx context.Context, a Activity, shares []int64) error

	// Activity returns one activity. Errors: ErrNotFound.
	Activity(ctx context.Context, id string) (Activity, error)

	// Activities returns every activity that ends after since.
	Activities(ctx context.Context, since time.Time) ([]Activity, error)

	// ReviseActivity stores a as revision a.Revision of its activity, and records that the gate
	// is owed the revision (what r says it does to the gate: r.Add units, or r.Reload), in one
	// transaction, provided the stored activity is revision a.Revision-1. Errors: ErrNotFound,
	// ErrChanged (another change came first: read it again), ErrInvalid (the database refuses a:
	// fewer units than it sold).
	ReviseActivity(ctx context.Context, a Activity, r Revision) error

	// Unrevised lists up to limit revisions the gate is owed, of activity id ("": of every
	// activity), each activity's in the order of their numbers.
	Unrevised(ctx context.Context, id string, limit int) ([]Revision, error)

	// Revised records that the gate holds revision rev of activity id. Recording it twice is
	// harmless.
	Revised(ctx context.Context, id string, rev int64) error

	// Archive records that activity id's hot state was archived at at (Activity.ArchivedAt); a
	// second call leaves the first time. Errors: ErrNotFound.
	Archive(ctx context.Context, id string, at time.Time) error
}

// OrderStore keeps the orders as the service reads and changes them.
type OrderStore interface {
	// GateState reads what the gate of activity a must hold, including queued grabs that pending
	// lists (the queue's grabs that have no order yet).
	GateState(ctx context.Context, a Activity, pending []Grab) (GateState, error)

	// Order returns the order of a token; a grab the workers dead-lettered comes as a FAILED
	// order. Errors: ErrNotFound.
	Order(ctx context.Context, token string) (Order, error)

	// OrderByID returns an order by its numeric id. Errors: ErrNotFound.
	OrderByID(ctx context.Context, id int64) (Order, error)

	// Pay marks a CREATED order PAID if now is inside its payment window; paying a PAID order
	// again returns it unchanged. Errors: ErrNotFound, ErrInvalidState.
	Pay(ctx context.Context, token string, now time.Time) (Order, error)

	// Cancel moves a CREATED order to CANCELLED and reports whether this call did it, so that
	// exactly one caller restocks. In the same transaction it records the restock as owed (see
	// Unreleased), so that a gate that fails after the commit cannot lose the unit. Cancelling a
	// CANCELLED order returns it with false. Errors: ErrNotFound, ErrInvalidState.
	Cancel(ctx context.Context, token, reason string, now time.Time) (Order, bool, error)

	// Unreleased lists up to limit cancelled orders whose unit is owed to the gate still, the
	// oldest first.
	Unreleased(ctx context.Context, limit int) ([]Order, error)

	// Released records that the unit of the order of token is back in the gate. Recording it
	// twice is harmless.
	Released(ctx context.Context, token string) error

	// Expired lists up to limit CREATED orders whose payment window closed before now.
	Expired(ctx context.Context, now time.Time, limit int) ([]Order, error)

	// Counts reports an activity's orders by status, and its dead letters.
	Counts(ctx context.Context, activityID string) (Counts, error)

	// Orders lists the orders f selects, the newest first.
	Orders(ctx context.Context, f OrderFilter) ([]Order, error)

	// EachOrder calls fn with every order of activityID, the oldest first, reading them in
	// pages; an error of fn stops it and is returned.
	EachOrder(ctx context.Context, activityID string, fn func(Order) error) error

	// DeadLetters lists up to limit dead letters of activityID ("": all), the newest first.
	DeadLetters(ctx context.Context, activityID string, limit int) ([]DeadLetter, error)

	// ReplayDeadLetter places the dead letter of token as PlaceOrders would place its grab, and
	// deletes it, in one transaction; but the order's payment window opens at now (the replay),
	// not at the grab: its buyer had no order to pay until now. Errors: ErrNotFound, ErrInvalid
	// (its grab was not kept), ErrUnplaceable, ErrBusy.
	ReplayDeadLetter(ctx context.Context, token string, now time.Time) (Placement, error)
}

// Placer is the database as the workers see it: where grabs become orders, or dead letters.
type Placer interface {
	// PlaceOrders turns grabs into orders in one transaction, idempotently per token: a grab
	// whose token already has an order gets that order back. A grab the guard refuses (no unit
	// left, the user's limit reached, the share taken) becomes a FAILED order. Orders open
	// their payment window at the grab's time. Errors: ErrUnplaceable (a grab of the batch can
	// never be placed: nothing was written), ErrBusy.
	PlaceOrders(ctx context.Context, gs []Grab) ([]Placement, error)

	// DeadLetter records a grab the workers gave up on after attempts deliveries. Recording it
	// twice is harmless.
	DeadLetter(ctx context.Context, g Grab, attempts int, reason string, now time.Time) error
}

// BlockStore keeps the blacklist.
type BlockStore interface {
	// AddBlock adds b to the blacklist, replacing an entry of the same kind and value.
	AddBlock(ctx context.Context, b Block) error

	// RemoveBlock removes the entry of kind and value. Errors: ErrNotFound.
	RemoveBlock(ctx context.Context, kind BlockKind, value string) error

	// Blocks lists the blacklist's entries still in force at now.
	Blocks(ctx context.Context, now time.Time) ([]Block, error)
}

// AuditStore keeps the audit log of admin actions.
type AuditStore interface {
	// Record appends e to the log; e.ID is ignored (the log numbers its entries).
	Record(ctx context.Context, e AuditEntry) error

	// Entries returns up to limit entries with an id below before (0: any), the newest first.
	Entries(ctx context.Context, before int64, limit int) ([]AuditEntry, error)
}

// Restocks tells every node that units of an activity went back on sale (a cancelled or expired
// order), so that each clears its local sold-out flag at once instead of when it expires. It is
// best effort: a node that misses an announcement (a broken connection) still asks the gate again
// when its flag expires, so nothing stays unsold for longer than that.
type Restocks interface {
	// Announce tells the other nodes that activityID has units again.
	Announce(ctx context.Context, activityID string) error
	// Listen calls heard with every activity announced, until ctx ends.
	Listen(ctx context.Context, heard func(activityID string)) error
}

// Lease lets one node of many run a periodic job (the scheduled reconcile): the node holding a
// name's lease does the job, the others skip their turn.
type Lease interface {
	// Hold takes the lease of name for holder for ttl, or extends it if holder has it already;
	// false when another holder has it.
	Hold(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
}

// Line is an activity's waiting line, durable before it answers: in process with a journal in
// embedded mode, in Redis in distributed mode.
type Line interface {
	// Drop forgets an activity's line and its tickets (archived once its sale is over).
	Drop(ctx context.Context, activityID string) error
	// Join gives r.UserID a ticket: an early one before r.Activity's start unless the line is
	// sealed, else one at the tail (r.Tail; ErrEnded otherwise). A first ticket joined at or after
	// the start seals the line. A user whose ticket is still waiting gets it back (Fresh false).
	// A join with the r.Key of a join that took a ticket gets that ticket, answered or not, before
	// any other rule (Fresh true: it is the first join's answer again); with r.Lookup it takes
	// nothing, and without such a ticket is refused with ErrNotFound. The line's state comes with
	// the ticket, read in the same step. Errors: ErrQueueFull when Activity.QueueCap tickets are
	// waiting, ErrEnded, ErrNotFound, ErrBusy.
	Join(ctx context.Context, r JoinRequest) (Joined, error)

	// Revise gives the line revision a of its activity, as the gate is given it: from then on a
	// join at or after a.EndAt is refused with ErrEnded, whatever the joiner's copy of the
	// activity says (a node whose copy predates an end issues no ticket). A revision older than
	// the one the line has changes nothing. Errors: ErrBusy.
	Revise(ctx context.Context, a Activity) error

	// Ticket returns the ticket of token and its line's state. Errors: ErrNotFound, ErrBusy.
	Ticket(ctx context.Context, token string) (Ticket, LineState, error)

	// State returns the line's state (the zero state for a line nobody joined).
	State(ctx context.Context, activityID string) (LineState, error)

	// Seal closes the early crowd of a, and gives the early tickets their places in the order
	// DrawOrder(a.Seed, their tokens). It is idempotent.
	Seal(ctx context.Context, a Activity) (LineState, error)

	// Early returns the tokens of a sealed line's early tickets, in no particular order: the
	// entries of the draw, which anyone may recompute from them and the revealed seed.
	Early(ctx context.Context, activityID string) ([]string, error)

	// Next returns the tickets placed in [from, to), up to n places from the head (from): the
	// drainer's next batch. Places whose ticket was never acknowledged are skipped.
	Next(ctx context.Context, activityID string, n int) (from, to int64, ts []Ticket, err error)

	// Admit records the outcomes of the tickets of a batch and moves the head from from to to,
	// if the head is still at from (another drainer may have got there first: then it does
	// nothing). It remembers rate as the measured admissions a second.
	Admit(ctx context.Context, activityID string, from, to int64, ts []Ticket, rate float64) error

	// Skip answers every placed ticket from the head (if it is at from) to the tail: the gate has
	// nothing left for them. It reports the new head.
	Skip(ctx context.Context, activityID string, from int64) (int64, error)

	// Lead makes holder the activity's drainer for ttl, or keeps it so, unless another holder
	// leads. It reports whether holder leads.
	Lead(ctx context.Context, activityID, holder string, ttl time.Duration) (bool, error)
}

// Ranking keeps red packets' leaderboards beside the gate. Members are grabs with placed orders,
// identified by their tokens: each is added once (when its order is created, or by Load) and
// removed at most once (when its order is cancelled). A removal is remembered, across loads: an
// Add or Restore told after it (a worker's placement told late, its order cancelled meanwhile)
// leaves the grab off, and a second Remove does nothing, so a removal may be told again until
// it is answered.
type Ranking interface {
	// Load replaces the leaderboard of a with held; max is the largest share of the split.
	Load(ctx context.Context, a Activity, held []Grab, max int64) error
	// Add puts grabs on their activities' leaderboards; Remove takes them off.
	Add(ctx context.Context, gs []Grab) error
	Remove(ctx context.Context, gs []Grab) error
	// Restore puts back grabs that may be on their leaderboards already: orders placed before
	// and met again (a redelivery, or a placement whose reply was lost after it committed, which
	// nobody added). An exact leaderboard adds those it lacks; a histogram, which cannot tell
	// whether a share is counted, leaves them.
	Restore(ctx context.Context, gs []Grab) error
	// Top returns the first n of an exact leaderboard. ErrApproximate: the leaderboard is a
	// histogram, which has no top.
	Top(ctx context.Context, activityID string, n int) ([]Standing, error)
	// Rank returns the rank of grab g, exactly (bound 0) or estimated within bound, and the
	// strategy that answered. ErrNotFound: g is not on the leaderboard.
	Rank(ctx context.Context, g Grab) (rank, bound int64, strategy string, err error)
	// Usage names the strategy of an activity's leaderboard and the memory it holds.
	Usage(ctx context.Context, activityID string) (strategy string, bytes int64, err error)
	// Drop forgets an activity's leaderboard (archived: the database answers for it).
	Drop(ctx context.Context, activityID string) error
}

// LeaderStore is what the database answers for leaderboards, over the covering index of
// orders (activity, amount, time).
type LeaderStore interface {
	// TopGrabs returns the first n orders holding a share of activityID as standings.
	TopGrabs(ctx context.Context, activityID string, n int) ([]Standing, error)
	// RankOf returns 1 + the orders holding a share that rank above g.
	RankOf(ctx context.Context, g Grab) (int64, error)
	// BestGrab returns the largest share userID holds in activityID. Errors: ErrNotFound.
	BestGrab(ctx context.Context, activityID, userID string) (Grab, error)
}

// ChallengeStore keeps the challenges handed out until they are answered. Every challenge is
// tried once: Take removes it, so guessing its answer costs a new challenge per guess.
type ChallengeStore interface {
	// Put keeps c for ttl.
	Put(ctx context.Context, c Challenge, ttl time.Duration) error
	// Take removes the challenge id and returns it. Errors: ErrNotFound (unknown, expired or
	// taken already), ErrBusy.
	Take(ctx context.Context, id string) (Challenge, error)
}

// Journal is the durable queue of acknowledged grabs that the embedded gate appends to and the
// embedded queue reads. Deliveries carry the journal's sequence number as their ID.
type Journal interface {
	// AppendGrabs stores grabs in one transaction; when it returns nil they are durable.
	AppendGrabs(ctx context.Context, gs []Grab) error
	// QueuedGrabs returns up to limit grabs with a sequence above after, in sequence order.
	QueuedGrabs(ctx context.Context, after int64, limit int) ([]Delivery, error)
	// RemoveGrabs deletes grabs whose orders are placed.
	RemoveGrabs(ctx context.Context, tokens []string) error
	// QueuedGrab returns the grab of token while it is queued. Errors: ErrNotFound.
	QueuedGrab(ctx context.Context, token string) (Grab, error)
	// QueueDepth counts an activity's queued grabs.
	QueueDepth(ctx context.Context, activityID string) (int64, error)
	// UnackedGrabs returns an activity's queued grabs.
	UnackedGrabs(ctx context.Context, activityID string) ([]Grab, error)
}

// LineJournal is the durable record of the embedded lines: the tickets, each written before its
// join is answered, and each line's seal and head.
type LineJournal interface {
	// AppendTickets stores new tickets in one transaction.
	AppendTickets(ctx context.Context, ts []TicketRow) error
	// SealLine records that an activity's early crowd is closed.
	SealLine(ctx context.Context, activityID string) error
	// AdmitTickets records the outcomes of ts and moves the head from from to to, in one
	// transaction, unless the head is elsewhere.
	AdmitTickets(ctx context.Context, activityID string, from, to int64, ts []TicketRow) error
	// LoadLines returns every line: its seal, its head and its tickets.
	LoadLines(ctx context.Context) ([]LineRecord, error)
	// DropLine deletes an activity's line and tickets (archived).
	DropLine(ctx context.Context, activityID string) error
}

// TicketRow is a ticket as the journal keeps it: Seq, given by the process in the order of the
// joins, is its key there.
type TicketRow struct {
	Seq int64
	Ticket
	Key string // the Idempotency-Key of the join that took it ("" for none)
}

// LineRecord is one line as its journal keeps it.
type LineRecord struct {
	ActivityID string
	Sealed     bool
	Head       int64
	Tickets    []TicketRow // early tickets with place -1
}
