package sale

import (
	"context"
	"time"
)

// Gate is the stock gate: the one atomic step that checks the sale window, the per-user limit and
// the stock, takes a unit, records the buyer and enqueues the grab. An implementation answers
// only once the grab is durable (group-committed to the embedded journal, or appended to a Redis
// stream by the same script that took the unit), so an acknowledged grab is never lost.
type Gate interface {
	// Load makes activity a sellable with the holdings of st, replacing whatever the gate knew of
	// it. It is how a new activity is loaded; nothing may be selling it yet.
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
	// Errors: ErrChanged (a grab or a release came meanwhile: try again at rest), ErrBusy.
	Repair(ctx context.Context, a Activity, read func(ctx context.Context, remaining int64) (GateState, bool, error)) (bool, error)

	// Grab takes one unit for r.UserID. A request repeating an idempotency key already granted
	// returns the first grab again and takes nothing. Otherwise a pass in r.Pass is spent first:
	// it must be one issued to r.UserID for this activity and not expired at r.Now, and a grab
	// without one is refused if the activity requires a challenge. Errors: ErrNotFound,
	// ErrNotStarted, ErrEnded, ErrChallengeRequired, ErrAlreadyBought, ErrSoldOut, ErrBusy.
	Grab(ctx context.Context, r GrabRequest) (Grab, error)

	// IssuePass stores, at now, a one-time pass (a path token) that lets userID grab from a
	// until expires. A grab that carries a pass spends it whatever its outcome, and a grab from
	// an activity that requires a challenge must carry one. Errors: ErrNotFound, ErrBusy.
	IssuePass(ctx context.Context, a Activity, userID, token string, now, expires time.Time) error

	// SpendPass spends, at now, a pass token that userID shows to join a line (a grab spends its
	// own): it must be one issued to userID for this activity and not expired; it is spent then,
	// whatever the join comes to, and a pass shown by someone else is left to its owner. Errors:
	// ErrChallengeRequired (no such pass, or spent, expired or someone else's), ErrNotFound,
	// ErrBusy.
	SpendPass(ctx context.Context, activityID, userID, token string, now time.Time) error

	// Release gives the unit of a cancelled grab back: the stock (or the red-packet share)
	// returns and the buyer may grab again. It is idempotent per grab token. Errors: ErrBusy.
	Release(ctx context.Context, g Grab) error

	// Remaining reports the units the gate still has for an activity. Errors: ErrNotFound,
	// ErrBusy.
	Remaining(ctx context.Context, activityID string) (int64, error)

	// Drop forgets everything the gate holds for an activity (its stock, holdings, answers,
	// grab records, streams): its hot state, archived once the sale is over and drained (see
	// Service.Archive). Dropping what is not there is no error.
	Drop(ctx context.Context, activityID string) error
}

// Delivery is a grab handed to a worker. It stays in the queue until acknowledged, and is
// delivered again (to this or another worker) if the worker dies first.
type Delivery struct {
	ID       string
	Grab     Grab
	Attempts int // deliveries so far, this one included
}

// Queue carries acknowledged grabs from the gate to the workers that turn them into orders.
type Queue interface {
	// Receive waits until at least one grab is ready (or ctx ends) and returns up to max.
	Receive(ctx context.Context, max int) ([]Delivery, error)

	// Ack removes processed deliveries from the queue.
	Ack(ctx context.Context, ds []Delivery) error

	// Pending returns the queued grab with this token. Errors: ErrNotFound.
	Pending(ctx context.Context, token string) (Grab, error)

	// Depth reports the grabs of an activity not yet acknowledged by a worker.
	Depth(ctx context.Context, activityID string) (int64, error)

	// Unacked returns the grabs of an activity not yet acknowledged by a worker: with the
	// database's orders they are what the gate must hold.
	Unacked(ctx context.Context, activityID string) ([]Grab, error)

	// Bury takes deliveries the workers gave up on out of the queue, keeping them where a person
	// can look (a dead-letter stream), and acknowledges them.
	Bury(ctx context.Context, ds []Delivery, reason string) error
}

// Placement is the database's answer to one grab: the order it now has for the grab's token.
type Placement struct {
	Order Order
	New   bool // this call created the order (false: it existed, e.g. a redelivery)
}

// Store is the database: the record of activities and orders, and the final guard. Its unique
// keys and conditional updates keep orders within stock and per-user limits even if a gate lies.
type Store interface {
	// CreateActivity stores a and, for a red packet, its shares. Errors: ErrExists.
	CreateActivity(ctx context.Context, a Activity, shares []int64) error

	// Activity returns one activity. Errors: ErrNotFound.
	Activity(ctx context.Context, id string) (Activity, error)

	// Activities returns every activity that ends after since.
	Activities(ctx context.Context, since time.Time) ([]Activity, error)

	// Archive records that activity id's hot state was archived at at (Activity.ArchivedAt); a
	// second call leaves the first time. Errors: ErrNotFound.
	Archive(ctx context.Context, id string, at time.Time) error

	// GateState reads what the gate of activity a must hold, including queued grabs that pending
	// lists (the queue's grabs that have no order yet).
	GateState(ctx context.Context, a Activity, pending []Grab) (GateState, error)

	// PlaceOrders turns grabs into orders in one transaction, idempotently per token: a grab
	// whose token already has an order gets that order back. A grab the guard refuses (no unit
	// left, the user's limit reached, the share taken) becomes a FAILED order. Orders open
	// their payment window at the grab's time. Errors: ErrUnplaceable (a grab of the batch can
	// never be placed: nothing was written), ErrBusy.
	PlaceOrders(ctx context.Context, gs []Grab) ([]Placement, error)

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

	// DeadLetter records a grab the workers gave up on after attempts deliveries. Recording it
	// twice is harmless.
	DeadLetter(ctx context.Context, g Grab, attempts int, reason string, now time.Time) error

	// AddBlock adds b to the blacklist, replacing an entry of the same kind and value.
	AddBlock(ctx context.Context, b Block) error

	// RemoveBlock removes the entry of kind and value. Errors: ErrNotFound.
	RemoveBlock(ctx context.Context, kind BlockKind, value string) error

	// Blocks lists the blacklist's entries still in force at now.
	Blocks(ctx context.Context, now time.Time) ([]Block, error)

	// Ping reports whether the database answers.
	Ping(ctx context.Context) error
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
