package sale

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// The errors a sale can end in. Adapters translate their own failures (Lua return codes, unique
// key violations, redis.Nil) into these at their boundary; the HTTP layer maps each to one status
// and one stable code.
var (
	ErrInvalid           = errors.New("invalid argument")
	ErrUnauthorized      = errors.New("unauthorized")
	ErrForbidden         = errors.New("forbidden")
	ErrNotFound          = errors.New("not found")
	ErrNotStarted        = errors.New("the sale has not started")
	ErrEnded             = errors.New("the sale has ended")
	ErrChallengeRequired = errors.New("a challenge must be solved first")
	ErrChallengeFailed   = errors.New("the challenge was not solved")
	ErrBlocked           = errors.New("blocked")
	ErrAlreadyBought     = errors.New("the per-user limit is reached")
	ErrSoldOut           = errors.New("sold out")
	ErrInvalidState      = errors.New("the order's state forbids this")
	ErrExists            = errors.New("already exists")
	ErrRateLimited       = errors.New("too many requests")
	ErrBusy              = errors.New("busy: a dependency is unavailable")
	ErrTooLarge          = errors.New("request body too large")
	// ErrChanged says the gate moved while a repair read it: the repair was not made.
	ErrChanged = errors.New("the gate changed while it was being repaired")
	// ErrUnplaceable says the database refuses a grab for what it is (its activity does not
	// exist, a value does not fit), not for being away: placing it again can never succeed.
	ErrUnplaceable = errors.New("the grab can never be placed as an order")
)

// Throttled is ErrRateLimited with the wait its limiter named: when a request would pass again.
type Throttled struct{ RetryAfter time.Duration }

func (t Throttled) Error() string {
	return fmt.Sprintf("%v: retry after %s", ErrRateLimited, t.RetryAfter)
}

// Unwrap makes a Throttled an ErrRateLimited.
func (t Throttled) Unwrap() error { return ErrRateLimited }

// ErrStale says the gate holds another revision of an activity than the caller's copy
// (Activity.Revision): the activity changed (stock added, the sale ended) since the caller read
// it, or the change has not reached the gate yet. It is the gate's answer, not its failure: the
// gate did its work and nothing was taken. The service answers it by reading the activity again
// (once per activity, however many grabs meet it) and giving the gate the revisions it lacks.
var ErrStale = errors.New("the gate holds another revision of the activity")

// ErrUnloaded says the gate does not hold an activity that exists: a cache that lost its data
// (Redis restarted without its AOF, a failover to an empty replica). Like ErrStale it is an
// answer of a gate that works; the service answers it by rebuilding the activity in the gate
// from the database and the queue. Neither reaches a buyer as such: one that the service could
// not settle within the request becomes ErrBusy.
var ErrUnloaded = errors.New("the activity is not loaded in the gate")

// ErrInProgress says the first request with the same idempotency key is still being decided (a
// grab looking for its unit on a sharded stock's other shards, or one a failover cut off half-way,
// until it is surely over). The client is told busy, to ask again; but the dependency answered,
// and a breaker that counted it as a failure would open on the repeats of the keys a failover
// struck, long after the failover: it is a verdict.
var ErrInProgress = fmt.Errorf("%w: the first request with this idempotency key is still being decided", ErrBusy)

// ErrContended says the database kept losing races for the same rows (a deadlock, a
// serialization failure, a lock waited out) however many times the transaction was run again:
// the crowd wants those rows at once. The client is told busy, to ask again; but the database
// answered, and a breaker that counted it as failing would shed everything it serves because
// four nodes' sweepers met on one activity's row (Sentinel seed 3 of the nemesis): a verdict.
var ErrContended = fmt.Errorf("%w: the database kept losing races for the same rows", ErrBusy)

// errArchived says an activity's hot state was archived: what the gate would say, the database
// answers.
var errArchived = errors.New("the activity is archived")

// verdicts are the errors that are the sale's verdict on a request, not a failure of a dependency.
// ErrStale and ErrUnloaded are among them: a gate that says its copy is of another revision, or
// that it lost the activity, answered, and a breaker that counted them as failures would take a
// crowd meeting an operator's change for a dependency down.
var verdicts = []error{ErrInvalid, ErrUnauthorized, ErrForbidden, ErrNotFound, ErrNotStarted, ErrEnded,
	ErrChallengeRequired, ErrChallengeFailed, ErrBlocked, ErrAlreadyBought, ErrSoldOut, ErrInvalidState,
	ErrExists, ErrRateLimited, ErrTooLarge, ErrQueueFull, ErrChanged, ErrUnplaceable, ErrAmountMismatch,
	ErrStale, ErrUnloaded, ErrNotReservable, ErrReservationsClosed, ErrReservationsNotOpen, ErrNotReserved,
	ErrNoReservation, ErrWaveNotOpen}

// IsVerdict reports whether err is one of the sale's verdicts (sold out, not found, ...) rather
// than a failure: a dependency down, or something unforeseen.
func IsVerdict(err error) bool {
	if errors.Is(err, ErrInProgress) || errors.Is(err, ErrContended) {
		return true // busy for the client, but the dependency answered
	}
	if errors.Is(err, ErrBusy) {
		return false
	}
	for _, a := range verdicts {
		if errors.Is(err, a) {
			return true
		}
	}
	return false
}

// Busy is the one shape of a backend's failure: ErrBusy (a retryable 503 for the caller), what
// was being done, and the backend's own error, kept in the chain for errors.Is. Adapters wrap
// every failure of their server with it, e.g. Busy(err, "load activity %s into redis", id).
// The exception is an error that may be a context's own, from a batch that outlived the caller
// who waits on it (redisstore's coalesced grabs, the embedded gate's group commit): those
// are wrapped with %v, so that the breaker never takes a failed batch for a caller who gave up.
func Busy(err error, doing string, args ...any) error {
	if len(args) > 0 {
		doing = fmt.Sprintf(doing, args...)
	}
	return busy{doing: doing, err: err}
}

// busy is Busy's error. Its text says busy once, even when the backend's error already did (a
// write the replicas did not acknowledge is busy where it is found): "busy: a dependency is
// unavailable: grab on redis: the write did not reach ...", not "busy: ...: busy: ...".
type busy struct {
	doing string
	err   error
}

func (b busy) Error() string {
	return ErrBusy.Error() + ": " + b.doing + ": " + strings.TrimPrefix(b.err.Error(), ErrBusy.Error()+": ")
}

func (b busy) Unwrap() []error { return []error{ErrBusy, b.err} }
