package sale

import (
	"errors"
	"fmt"
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
	ErrBlocked           = errors.New("blocked")
	ErrAlreadyBought     = errors.New("the per-user limit is reached")
	ErrSoldOut           = errors.New("sold out")
	ErrInvalidState      = errors.New("the order's state forbids this")
	ErrExists            = errors.New("already exists")
	ErrRateLimited       = errors.New("too many requests")
	ErrBusy              = errors.New("busy: a dependency is unavailable")
	ErrTooLarge          = errors.New("request body too large")
)

// ErrUnloaded says the gate does not hold an activity that exists: a cache that lost its data
// (Redis restarted without its AOF, a failover to an empty replica). It is a kind of ErrBusy; the
// service answers it by rebuilding the activity in the gate from the database and the queue.
var ErrUnloaded = fmt.Errorf("%w: the activity is not loaded in the gate", ErrBusy)
