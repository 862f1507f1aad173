// Package sale is the domain of seckill: activities, grabs and orders, the errors a sale can end
// in, and the interfaces that stock gates, queues and stores implement. It knows nothing of HTTP,
// Redis or SQL; adapters import it, never the other way round.
package sale

import (
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Kind says what an activity sells.
type Kind string

// The kinds of activity.
const (
	KindItem      Kind = "item"      // Stock identical units at PriceCents each
	KindRedPacket Kind = "redpacket" // TotalCents split at creation into Stock shares
)

// Admission says how grabs are admitted to the stock gate.
type Admission string

// The admission modes. Direct grabs go to the stock gate as they come: the fastest client wins.
// Queue and lottery grabs join the activity's waiting line instead (see Line), and a drainer
// admits them to the gate in the line's order.
const (
	AdmitDirect  Admission = "direct"  // first come, first served at the gate
	AdmitQueue   Admission = "queue"   // a waiting room: the early crowd shuffled at the start, then FIFO
	AdmitLottery Admission = "lottery" // entries until the start, then a verifiable draw for the stock
)

// Limits on what an activity may ask for. They keep arithmetic far from overflow and rows small.
const (
	MaxStock = 100_000_000
	// MaxShares bounds a red packet's count. A red packet is split whole when it is created: its
	// shares are one database transaction and one gate load, and each share is a row and a list
	// entry. 1,000,000 shares take 3.1 s and 96 MB at peak on an embedded node (two cores); 10
	// million took 534 MB and ran past the database's call deadline. A larger rain is several
	// red packets.
	MaxShares       = 1_000_000
	MaxPerUserLimit = 1_000
	MaxCents        = 1_000_000_000_000 // ten billion in the currency's major unit
	MaxPayWindow    = 7 * 24 * time.Hour
	MaxNameLen      = 200
	MaxStockShards  = 64
	MaxIDLen        = 64
	MaxQueueCap     = 100_000_000 // tickets waiting in one line
	MaxAdmitRate    = 1_000_000   // tickets admitted per second
)

// Defaults of a line's settings: the cap is a multiple of the stock, the rate a number of
// tickets a second.
const (
	DefaultQueueFactor = 10
	DefaultAdmitRate   = 1000
)

// Activity is one sale: a flash sale of items or a red-packet drop. It does not change after it
// is created, but for ArchivedAt, set once its hot state is archived (a node's cached copy may
// not know it yet).
type Activity struct {
	ID               string
	Name             string
	Kind             Kind
	Stock            int64 // units for sale; the number of shares for a red packet
	PriceCents       int64
	PerUserLimit     int64
	StartAt          time.Time
	EndAt            time.Time
	PayWindow        time.Duration
	TotalCents       int64 // red packet only: the sum of all shares
	RequireChallenge bool
	Admission        Admission
	Rates            Rates // this activity's own rate limits, overriding the node's
	// StockShards splits an item's stock into that many counters on different Redis Cluster
	// slots, for an item so hot that one slot's core cannot take its crowd (1: one counter).
	// The embedded gate, in one process, keeps one counter whatever it says.
	StockShards int64
	// QueueCap bounds the tickets waiting in a queue or lottery line at once (QUEUE_FULL beyond);
	// AdmitRate is how many tickets a second the line's drainer admits to the gate (queue mode).
	QueueCap, AdmitRate int64
	// Seed orders the early crowd of a queue or lottery line (see DrawOrder). It is secret until
	// the draw; its commitment is public from the creation.
	Seed      Seed
	CreatedAt time.Time
	// Revision counts the activity's versions: 1 as created, one more for every change an
	// operator makes (stock added, the sale ended early). The gate keeps the revision it holds
	// and refuses a grab made on another (ErrStale), so that a node whose copy is out of date
	// never sells on it: it reads the activity again first.
	Revision int64
	// ArchivedAt is when the activity's hot state (its gate, line and leaderboard) was dropped,
	// its sale over, its pay windows closed and its queue drained; zero while it is live. An
	// archived activity answers from the database (see Service.Archive).
	ArchivedAt time.Time
}

// Archived reports whether a's hot state was archived.
func (a Activity) Archived() bool { return !a.ArchivedAt.IsZero() }

// Lined reports whether grabs join a waiting line rather than go straight to the gate.
func (a Activity) Lined() bool { return a.Admission == AdmitQueue || a.Admission == AdmitLottery }

// Rates are an activity's own grab rate limits in requests per second: per user, per client IP
// and for the whole activity. Zero keeps the node's setting; RateOff switches a limit off.
type Rates struct {
	PerUser, PerIP, Global int64
}

// RateOff switches a rate limit off for one activity.
const RateOff = -1

// MaxRate bounds a rate limit, in requests per second.
const MaxRate = 1_000_000

// EffectiveRate is the rate limit to apply for an activity whose own setting is r and whose
// node's is node: r unless it is zero (then the node's), with RateOff as 0 (off).
func EffectiveRate(r, node int64) int64 {
	switch {
	case r == 0:
		return node
	case r == RateOff:
		return 0
	}
	return r
}

// Validate reports the first thing wrong with a, wrapped in ErrInvalid.
func (a Activity) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
	}
	switch {
	case !ValidID(a.ID):
		return badID("id")
	case strings.TrimSpace(a.Name) == "":
		return bad("name is required")
	case utf8.RuneCountInString(a.Name) > MaxNameLen || !utf8.ValidString(a.Name):
		return bad("name must be valid UTF-8 of at most %d characters", MaxNameLen)
	case a.Kind != KindItem && a.Kind != KindRedPacket:
		return bad("kind must be %q or %q", KindItem, KindRedPacket)
	case a.Stock <= 0 || a.Stock > MaxStock:
		return bad("stock must be between 1 and %d", MaxStock)
	case a.PerUserLimit <= 0 || a.PerUserLimit > MaxPerUserLimit:
		return bad("per_user_limit must be between 1 and %d", MaxPerUserLimit)
	case a.StartAt.IsZero() || a.EndAt.IsZero():
		return bad("start_at and end_at are required")
	case !a.EndAt.After(a.StartAt):
		return bad("end_at must be after start_at")
	case a.PayWindow <= 0 || a.PayWindow > MaxPayWindow:
		return bad("pay_window_s must be between 1 and %d", int64(MaxPayWindow/time.Second))
	case a.Admission != AdmitDirect && !a.Lined():
		return bad("admission must be %q, %q or %q", AdmitDirect, AdmitQueue, AdmitLottery)
	case a.Lined() && (a.QueueCap < 1 || a.QueueCap > MaxQueueCap):
		return bad("queue_cap must be between 1 and %d", MaxQueueCap)
	case a.Lined() && (a.AdmitRate < 1 || a.AdmitRate > MaxAdmitRate):
		return bad("admit_rate must be between 1 and %d tickets a second", MaxAdmitRate)
	case !a.Lined() && (a.QueueCap != 0 || a.AdmitRate != 0):
		return bad("queue_cap and admit_rate are for queue and lottery admission")
	case a.StockShards < 1 || a.StockShards > MaxStockShards:
		return bad("stock_shards must be between 1 and %d", MaxStockShards)
	case a.StockShards > 1 && a.Kind != KindItem:
		return bad("stock_shards is for items; a red packet's shares stay in one list")
	case a.StockShards > a.Stock:
		return bad("stock_shards must not exceed the stock")
	}
	for _, r := range []int64{a.Rates.PerUser, a.Rates.PerIP, a.Rates.Global} {
		if r < RateOff || r > MaxRate {
			return bad("rate limits must be between 0 (off) and %d requests per second", MaxRate)
		}
	}
	switch a.Kind {
	case KindItem:
		if a.PriceCents < 0 || a.PriceCents > MaxCents {
			return bad("price_cents must be between 0 and %d", int64(MaxCents))
		}
		if a.TotalCents != 0 {
			return bad("total_cents is for red packets only")
		}
	case KindRedPacket:
		if a.Stock > MaxShares {
			return bad("count must be between 1 and %d shares", MaxShares)
		}
		if a.TotalCents < a.Stock || a.TotalCents > MaxCents {
			return bad("total_cents must be between count (every share at least 1 cent) and %d", int64(MaxCents))
		}
		if a.PriceCents != 0 {
			return bad("price_cents is for items only")
		}
	}
	return nil
}

// Open reports whether grabs are accepted at now: nil, ErrNotStarted or ErrEnded.
func (a Activity) Open(now time.Time) error {
	if now.Before(a.StartAt) {
		return ErrNotStarted
	}
	if !now.Before(a.EndAt) {
		return ErrEnded
	}
	return nil
}

// Grab is one acknowledged win: a unit (or a red-packet share) taken by a user. Its Token names
// the order that the worker will create from it.
type Grab struct {
	Token          string
	ActivityID     string
	UserID         string
	IdempotencyKey string // empty when the client sent none
	Share          int64  // red packet: the index of the share taken; 0 for items
	AmountCents    int64  // what the user pays (item) or receives (red packet)
	At             time.Time
	// Trace is the W3C traceparent of the gate call that took the grab, carried in its stream
	// entry so that the worker's spans join the click's trace; "" when it was not traced.
	Trace string
}

// GrabRequest asks the gate for one unit.
type GrabRequest struct {
	ActivityID     string
	UserID         string
	IdempotencyKey string
	Pass           string // the one-time path token of a solved challenge; "" for none
	Now            time.Time
	// UserRate, when set, is the user's request rate on this activity, checked and spent by the
	// gate in the grab's own call instead of in a bucket at the edge: a grab over it is refused
	// with Throttled and takes nothing. The Redis gate checks it (one call, so one fsync wait, an
	// all-win grab); the edge sets it only for that gate. Zero: the edge has checked.
	UserRate UserRate
}

// UserRate is a token bucket: PerSecond tokens a second, at most Burst at once.
type UserRate struct{ PerSecond, Burst int64 }

// Off reports whether the rate limits nothing.
func (r UserRate) Off() bool { return r.PerSecond <= 0 }

// MaxPassLen bounds a pass (path token) from a client.
const MaxPassLen = 40

// Status is the state of an order.
type Status string

// Order states. PENDING is a grab still in the queue; CREATED an order awaiting payment; FAILED a
// grab the database refused (its guard found no unit or the user's limit reached). A payment that
// comes for a CANCELLED order (its window closed and its unit went back on sale) never brings it
// back: the order becomes REFUND_PENDING, then REFUNDED once the money is given back.
const (
	StatusPending       Status = "PENDING"
	StatusCreated       Status = "CREATED"
	StatusPaid          Status = "PAID"
	StatusCancelled     Status = "CANCELLED"
	StatusFailed        Status = "FAILED"
	StatusRefundPending Status = "REFUND_PENDING"
	StatusRefunded      Status = "REFUNDED"
)

// Holds reports whether an order in status s holds a unit of stock.
func (s Status) Holds() bool { return s == StatusCreated || s == StatusPaid }

// Order is the durable result of a grab.
type Order struct {
	ID          int64
	Token       string
	ActivityID  string
	UserID      string
	IdemKey     string // the grab's idempotency key, kept so a retry finds its first answer
	Share       int64
	AmountCents int64
	Status      Status
	Reason      string // why the order failed or was cancelled
	CreatedAt   time.Time
	ExpiresAt   time.Time // end of the payment window
	ClosedAt    time.Time // when it was paid, cancelled or failed; zero while open
}

// Grab is the grab o was placed from: what a gate holds for it, a leaderboard ranks and a
// release gives back.
func (o Order) Grab() Grab {
	return Grab{Token: o.Token, ActivityID: o.ActivityID, UserID: o.UserID, IdempotencyKey: o.IdemKey,
		Share: o.Share, AmountCents: o.AmountCents, At: o.CreatedAt}
}

// Share is one pre-split part of a red packet.
type Share struct {
	Index       int64
	AmountCents int64
}

// GateState is what the database knows about an activity's stock, from which a gate is built or
// rebuilt: after a restart, a lost cache, or a reconcile.
type GateState struct {
	Held   []Grab  // grabs that hold a unit now: still queued, or with a CREATED or PAID order
	Keyed  []Grab  // every grab made with an idempotency key, so a retry gets the first answer
	Shares []Share // red packet: the shares nobody holds
}

// Remaining is how many units a gate holding st for a has left to sell: a red packet's shares
// nobody holds, an item's stock less the units held. It is negative when st holds more than a's
// stock, which no gate may load.
func (st GateState) Remaining(a Activity) int64 {
	if a.Kind == KindRedPacket {
		return int64(len(st.Shares))
	}
	return a.Stock - int64(len(st.Held))
}

// ReasonExpired is the reason of an order cancelled because its payment window closed.
const ReasonExpired = "payment window closed"

// Counts are an activity's orders by status, as the database sees them.
type Counts struct {
	Orders    int64 // every order row, failed ones included
	Created   int64
	Paid      int64
	Cancelled int64
	Expired   int64 // the cancelled orders whose payment window closed (ReasonExpired)
	Failed    int64
	// RefundPending and Refunded are cancelled orders whose payment came late: their unit went
	// back on sale as any cancelled order's did, and their money is (to be) given back.
	RefundPending int64
	Refunded      int64
	// DeadLetters are grabs the workers gave up on (not orders).
	DeadLetters int64
}

// Stats is the admin's view of an activity.
type Stats struct {
	Stock     int64
	Remaining int64
	Grabbed   int64
	Orders    int64
	Created   int64
	Paid      int64
	Cancelled int64
	Expired   int64 // of the cancelled, those whose payment window closed
	Failed    int64
	// RefundPending and Refunded are orders paid after they were cancelled (see Counts).
	RefundPending int64
	Refunded      int64
	PendingQueue  int64
	DeadLetters   int64
	// Line is the waiting line of a queue or lottery activity.
	Line *LineStats
}

// LineStats are a line's numbers for the dashboard.
type LineStats struct {
	Joined    int64 // tickets ever taken
	Waiting   int64 // not answered yet: the line's length
	Answered  int64 // admitted to the gate or answered sold out
	Early     int64 // the early crowd, shuffled at the start
	Sealed    bool
	DrainRate float64 // admissions a second, measured by the drainer
	WaitS     float64 // the estimated wait at the tail of the line
}

// ValidID reports whether s can name an activity: 1 to MaxIDLen ASCII letters, digits, '-' or '_'.
func ValidID(s string) bool {
	if len(s) == 0 || len(s) > MaxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

var token32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewToken returns a fresh unguessable identifier starting with prefix (a letter, so that a
// token is never mistaken for a numeric order id).
func NewToken(prefix string) string {
	var b [15]byte
	rand.Read(b[:]) // never fails: crypto/rand panics rather than return an error
	return prefix + token32.EncodeToString(b[:])
}

// sorted32 is base32 whose digits sort in byte order as their values do.
var sorted32 = base32.NewEncoding("234567abcdefghijklmnopqrstuvwxyz").WithPadding(base32.NoPadding)

// NewGrabToken returns a fresh grab token: "g", then the time of the grab in milliseconds (now:
// the clock its sale window was checked on, see GrabTokenTime) and 72 random bits, so that tokens
// made later sort later. The databases index grabs and orders by token; keys that
// arrive in order add to one end of the index instead of a page anywhere per grab, which is what
// a commit must write.
func NewGrabToken(now time.Time) string {
	var b [15]byte
	ms := uint64(now.UnixMilli())
	for i := range 6 {
		b[i] = byte(ms >> (8 * (5 - i)))
	}
	rand.Read(b[6:])
	return "g" + sorted32.EncodeToString(b[:])
}

// GrabTokenTime returns the time a grab token of NewGrabToken was made at, to the millisecond;
// false for anything else.
func GrabTokenTime(token string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(token, "g")
	if !ok || len(rest) != sorted32.EncodedLen(15) {
		return time.Time{}, false
	}
	b, err := sorted32.DecodeString(rest)
	if err != nil || len(b) != 15 {
		return time.Time{}, false
	}
	var ms uint64
	for _, c := range b[:6] {
		ms = ms<<8 | uint64(c)
	}
	return time.UnixMilli(int64(ms)), true
}
