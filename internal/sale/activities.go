package sale

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
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
	ID         string
	Name       string
	Kind       Kind
	Stock      int64 // units for sale; the number of shares for a red packet
	PriceCents int64
	// Currency is what the amounts are in (ISO 4217, lower case: "cny", "usd"); "" is the
	// shop's own, which each payment provider takes as its default (Alipay's and WeChat Pay's
	// is cny, the only one they take; Stripe's SECKILL_STRIPE_CURRENCY).
	Currency         string
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
	// Seed orders the early crowd of a queue or lottery line, or a reservation's waves drawn at
	// random (see DrawOrder). It is secret until the draw; its commitment is public from the
	// creation.
	Seed Seed
	// ReserveFrom opens a reservation sale's reservations (they close at StartAt); Waves splits
	// its reservers into that many waves, in WaveOrder, opening WaveInterval apart from StartAt
	// (see reservation.go).
	ReserveFrom  time.Time
	Waves        int64
	WaveInterval time.Duration
	WaveOrder    WaveOrder

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

// PassAtTheGate reports whether the gate asks each grab for a pass (the path token of a solved
// challenge): the activity requires a challenge and admits grabs directly. A line's challenge is
// passed at the join, so the grabs its drainer makes for the tickets carry none.
func (a Activity) PassAtTheGate() bool { return a.RequireChallenge && !a.Lined() }

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
	case a.Admission != AdmitDirect && a.Admission != AdmitReservation && !a.Lined():
		return bad("admission must be %q, %q, %q or %q", AdmitDirect, AdmitQueue, AdmitLottery, AdmitReservation)
	case a.Lined() && (a.QueueCap < 1 || a.QueueCap > MaxQueueCap):
		return bad("queue_cap must be between 1 and %d", MaxQueueCap)
	case a.Lined() && (a.AdmitRate < 1 || a.AdmitRate > MaxAdmitRate):
		return bad("admit_rate must be between 1 and %d tickets a second", MaxAdmitRate)
	case !a.Lined() && (a.QueueCap != 0 || a.AdmitRate != 0):
		return bad("queue_cap and admit_rate are for queue and lottery admission")
	case a.StockShards < 1 || a.StockShards > MaxStockShards:
		return bad("stock_shards must be between 1 and %d", MaxStockShards)
	case a.Currency != "" && !validCurrency(a.Currency):
		return bad("currency must be an ISO 4217 code in lower case, such as cny or usd")
	case a.StockShards > 1 && a.Kind != KindItem:
		return bad("stock_shards is for items; a red packet's shares stay in one list")
	case a.StockShards > a.Stock:
		return bad("stock_shards must not exceed the stock")
	}
	if err := a.validateWaves(); err != nil {
		return err
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
	if a.Admission == AdmitReservation {
		if a.ReserveFrom.IsZero() {
			a.ReserveFrom = s.now()
		}
		a.ReserveFrom = a.ReserveFrom.UTC().Truncate(time.Millisecond)
		if a.Waves == 0 {
			a.Waves = 1
		}
		if a.WaveOrder == "" {
			a.WaveOrder = WaveByNumber
		}
	}
	if a.Lined() || a.Admission == AdmitReservation {
		if a.Seed == (Seed{}) { // a reservation sale's, for waves drawn at random
			seed, err := NewSeed()
			if err != nil {
				return Activity{}, err
			}
			a.Seed = seed
		}
	}
	if a.Lined() {
		if a.QueueCap == 0 {
			a.QueueCap = min(DefaultQueueFactor*a.Stock, MaxQueueCap)
		}
		if a.AdmitRate == 0 {
			a.AdmitRate = DefaultAdmitRate
		}
		if s.line == nil {
			return Activity{}, fmt.Errorf("%w: admission %q needs a line, and this node has none", ErrInvalid, a.Admission)
		}
	}
	a.Revision = 1
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
	if err := s.activities.CreateActivity(ctx, a, shares); err != nil {
		return Activity{}, fmt.Errorf("create activity %s: %w", a.ID, err)
	}
	s.remember(a)
	if err := s.inventory.Load(ctx, a, st); err != nil {
		return Activity{}, fmt.Errorf("open activity %s in the gate: %w", a.ID, err)
	}
	if err := s.loadRanking(ctx, a, st, nil); err != nil {
		return Activity{}, fmt.Errorf("open the leaderboard of %s: %w", a.ID, err)
	}
	return a, nil
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
	a, err := s.activities.Activity(ctx, id)
	switch {
	case err == nil:
		s.remember(a)
	case errors.Is(err, ErrNotFound):
		s.misses.add(id, time.Now())
	}
	return a, err
}

// remember caches a on this node, unless it holds a later revision already: reads of the
// database that race (a rebuild's, a refresh's) never take a node's copy back.
func (s *Service) remember(a Activity) {
	for {
		old, loaded := s.acts.LoadOrStore(a.ID, a)
		if !loaded || old.(Activity).Revision > a.Revision || s.acts.CompareAndSwap(a.ID, old, a) {
			break
		}
	}
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
	acts, err := s.activities.Activities(ctx, s.now())
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

// misses remembers, for a moment, the activity ids the database said it does not have: a crowd
// asking for an id that does not exist (a stale link, a scanner) costs one query per id per
// MissTTL, not one per request. It holds at most max ids; when it is full, the ids past their
// time are dropped, and if none is, all are (a flood of made-up ids never grows it).
type misses struct {
	mu    sync.Mutex
	until map[string]time.Time // id -> when its miss is forgotten (real time)
	max   int
}

// MissTTL is how long a node trusts the database's "no such activity": an activity created on
// another node meanwhile is found at most this long after a miss (the node that created it
// knows it at once).
const MissTTL = time.Second

// maxMisses bounds the remembered misses of a node.
const maxMisses = 10_000

func newMisses(max int) *misses { return &misses{until: map[string]time.Time{}, max: max} }

// known reports whether id was missed less than MissTTL ago.
func (m *misses) known(id string, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.until[id]
	if ok && !now.Before(t) {
		delete(m.until, id)
		return false
	}
	return ok
}

// add remembers a miss of id at now.
func (m *misses) add(id string, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.until) >= m.max {
		for k, t := range m.until {
			if !now.Before(t) {
				delete(m.until, k)
			}
		}
		if len(m.until) >= m.max {
			clear(m.until)
		}
	}
	m.until[id] = now.Add(MissTTL)
}

// forget drops a remembered miss of id: the activity exists now.
func (m *misses) forget(id string) {
	m.mu.Lock()
	delete(m.until, id)
	m.mu.Unlock()
}

// size is how many misses are remembered.
func (m *misses) size() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.until)
}

// validCurrency says c looks like an ISO 4217 code in lower case: three letters.
func validCurrency(c string) bool {
	if len(c) != 3 {
		return false
	}
	for _, r := range c {
		if r < 'a' || r > 'z' {
			return false
		}
	}
	return true
}
