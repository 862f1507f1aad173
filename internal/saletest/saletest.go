// Package saletest holds the invariant checks that every wiring of a sale must pass, whatever
// gate, queue and store it runs on: a property test of random crowds, duplicate clicks, limits,
// cancellations and expiries. Each adapter's tests call it with real dependencies.
package saletest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"seckill/internal/sale"
)

// T0 is where every test clock that stands still starts: 12:00 UTC on 2001-11-30, decades before
// any day the tests run on, so that a test mixing it with the wall clock (a token minted on one
// and checked on the other, a TTL, a start_at) fails at once instead of on some later day. Tests
// of packages that saletest imports keep a copy of it.
var T0 = time.Date(2001, 11, 30, 12, 0, 0, 0, time.UTC)

// Clock is a settable clock for the service: standing still unless advanced, or (RealClock)
// running with the real time, ahead of it by whatever Advance added.
type Clock struct {
	ns   atomic.Int64 // the reading; for a real clock, the offset from the real time
	real bool
}

// NewClock returns a clock reading t.
func NewClock(t time.Time) *Clock {
	c := &Clock{}
	c.ns.Store(t.UnixNano())
	return c
}

// RealClock returns a clock that runs with the real time: what a browser test's server needs.
func RealClock() *Clock { return &Clock{real: true} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	if c.real {
		return time.Now().Add(time.Duration(c.ns.Load())).UTC()
	}
	return time.Unix(0, c.ns.Load()).UTC()
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// Env is one wiring of a sale under test.
type Env struct {
	Service *sale.Service
	// The features beside the core service, as the node builds them.
	sale.Features
	Store sale.Store
	Queue sale.Queue
	Clock *Clock
	// Drain returns once every acknowledged grab of the activity has its order.
	Drain func(activityID string)
	// Answers knows the answer of every challenge the service put.
	Answers *Answers
	// Faults break the gate under the service on demand.
	Faults *Faults
	// Hot names what still holds an activity's hot state (Redis keys, or the process's gate,
	// line and leaderboard): nothing once it is archived.
	Hot func(activityID string) []string
}

// NewEnv builds a fresh, empty Env whose service runs on clock; it stops when t's cleanup runs.
type NewEnv func(t testing.TB, clock *Clock) Env

// model is what the test knows from the answers it got.
type model struct {
	stock, limit int64
	acked        map[string]string // token -> user, every grab answered with success
	keyed        map[string]string // user + key -> token
	cancelled    map[string]bool
	owed         map[string]bool // cancelled, their unit not yet back in the gate
	dead         map[string]bool // acknowledged, dead-lettered: no order, the unit held until a reconcile
	freed        map[string]bool // dead letters whose unit a reconcile gave back
	paid         map[string]bool
	soldOut      bool
}

// heldBy counts the units user holds: acknowledged, not cancelled, and not a dead letter whose
// unit a reconcile gave back.
func (m *model) heldBy(user string) int64 {
	var n int64
	for tok, u := range m.acked {
		if u == user && !m.cancelled[tok] && !m.freed[tok] {
			n++
		}
	}
	return n
}

// repaired notes a reconcile's repair: the gate now holds what the database does, so the owed
// restocks and the dead letters' units are back in it.
func (m *model) repaired() {
	clear(m.owed)
	for tok := range m.dead {
		m.freed[tok] = true
	}
}

// owedBy counts user's cancelled units whose restock the gate has not taken yet.
func (m *model) owedBy(user string) int64 {
	var n int64
	for tok := range m.owed {
		if m.acked[tok] == user {
			n++
		}
	}
	return n
}

// held counts the units held, in the gate's view (which the owed restocks are not back in yet).
func (m *model) held() int64 {
	return int64(len(m.acked) - len(m.cancelled) - len(m.freed))
}

// Property runs random sales on newEnv and checks after every step that no more units are held
// than the stock and no user holds more than the limit, that a repeated idempotency key returns
// the first grab, and, after draining, that every acknowledged grab became exactly one order
// that holds its unit unless it was cancelled.
//
// All checks share one Env: each random sale is an activity of its own.
func Property(t *testing.T, newEnv NewEnv) {
	clock := NewClock(T0)
	env := newEnv(t, clock)
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		start := clock.Now()
		act := sale.Activity{
			Name: "property", Kind: sale.KindItem, PriceCents: 500,
			Stock:        rapid.Int64Range(1, 12).Draw(rt, "stock"),
			PerUserLimit: rapid.Int64Range(1, 3).Draw(rt, "limit"),
			StartAt:      start, EndAt: start.Add(24 * time.Hour), PayWindow: time.Minute,
			Admission: sale.AdmitDirect,
		}
		if rapid.Bool().Draw(rt, "red packet") {
			act.Kind, act.PriceCents = sale.KindRedPacket, 0
			act.TotalCents = act.Stock * rapid.Int64Range(1, 300).Draw(rt, "mean cents")
		}
		a, err := env.Service.CreateActivity(ctx, act)
		if err != nil {
			rt.Fatalf("create: %v", err)
		}
		m := &model{stock: a.Stock, limit: a.PerUserLimit, acked: map[string]string{}, keyed: map[string]string{},
			cancelled: map[string]bool{}, owed: map[string]bool{}, dead: map[string]bool{}, freed: map[string]bool{}, paid: map[string]bool{}}
		users := rapid.IntRange(1, 10).Draw(rt, "users")
		user := rapid.Custom(func(t *rapid.T) string { return fmt.Sprint("u", rapid.IntRange(0, users-1).Draw(t, "user")) })

		rt.Repeat(map[string]func(*rapid.T){
			"grab": func(rt *rapid.T) {
				u := user.Draw(rt, "who")
				key := rapid.SampledFrom([]string{"", "", "k1", "k2"}).Draw(rt, "key")
				g, err := env.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: u, IdempotencyKey: key})
				switch {
				case err == nil:
					if first, ok := m.keyed[u+key]; ok && key != "" {
						if g.Token != first {
							rt.Fatalf("key %q of %s returned %s, first answer was %s", key, u, g.Token, first)
						}
						return
					}
					if _, dup := m.acked[g.Token]; dup {
						rt.Fatalf("token %s answered twice without an idempotency key", g.Token)
					}
					m.acked[g.Token] = u
					if key != "" {
						m.keyed[u+key] = g.Token
					}
				case errors.Is(err, sale.ErrSoldOut):
					m.soldOut = true
				case errors.Is(err, sale.ErrAlreadyBought):
					// A unit whose restock is owed still counts for its buyer in the gate.
					if held := m.heldBy(u) + m.owedBy(u); held < m.limit {
						rt.Fatalf("%s refused as already bought holding %d of %d", u, held, m.limit)
					}
				default:
					rt.Fatalf("grab: %v", err)
				}
			},
			"cancel": func(rt *rapid.T) {
				tok, ok := pickLive(rt, m)
				if !ok {
					rt.Skip("nothing to cancel")
				}
				env.Drain(a.ID)
				o, err := env.Service.Cancel(ctx, m.acked[tok], tok)
				if err != nil {
					rt.Fatalf("cancel %s: %v", tok, err)
				}
				if o.Status != sale.StatusCancelled {
					rt.Fatalf("cancel %s: status %s", tok, o.Status)
				}
				m.cancelled[tok] = true
			},
			// The gate fails after the database committed the cancel: the cancel stands, the
			// unit is owed to the gate and comes back when the owed restocks are given back.
			"cancel, the gate failing": func(rt *rapid.T) {
				tok, ok := pickLive(rt, m)
				if !ok {
					rt.Skip("nothing to cancel")
				}
				env.Drain(a.ID)
				env.Faults.FailReleases(1)
				o, err := env.Service.Cancel(ctx, m.acked[tok], tok)
				env.Faults.FailReleases(0)
				if err != nil || o.Status != sale.StatusCancelled {
					rt.Fatalf("cancel %s with the gate failing: %v, %v; want CANCELLED, the restock owed", tok, o.Status, err)
				}
				m.cancelled[tok], m.owed[tok] = true, true
			},
			// A reconcile while a grab lands between its reading and its writing: the grab
			// survives (the repair is not made), and a repair made at rest counts the owed
			// restocks back.
			"reconcile under traffic": func(rt *rapid.T) {
				env.Drain(a.ID)
				u := user.Draw(rt, "who")
				var injected sale.Grab
				var injectedErr error
				ran := false
				env.Faults.DuringRepair(func() {
					ran = true
					injected, injectedErr = env.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: u})
				})
				rec, err := env.Service.Reconcile(ctx, a.ID)
				env.Faults.DuringRepair(nil)
				if err != nil {
					rt.Fatalf("reconcile under traffic: %v", err)
				}
				if ran && injectedErr == nil {
					m.acked[injected.Token] = u
				}
				if rec.Repaired {
					if ran && injectedErr == nil {
						rt.Fatalf("the reconcile repaired over a grab that landed meanwhile: %+v", rec)
					}
					m.repaired()
				}
			},
			// A grab the database can never place goes to the dead letters alone; the grabs
			// around it are placed.
			"a grab the database refuses": func(rt *rapid.T) {
				u := fmt.Sprint("poison-", len(m.dead))
				env.Faults.Unplaceable(u)
				g, err := env.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: u})
				if errors.Is(err, sale.ErrSoldOut) {
					m.soldOut = true
					return
				}
				if err != nil {
					rt.Fatalf("grab by %s: %v", u, err)
				}
				m.acked[g.Token], m.dead[g.Token] = u, true
				env.Drain(a.ID)
			},
			"give back owed restocks": func(rt *rapid.T) {
				giveBackOwed(rt, env, m)
			},
			"pay": func(rt *rapid.T) {
				tok, ok := pickLive(rt, m)
				if !ok {
					rt.Skip("nothing to pay")
				}
				env.Drain(a.ID)
				o, err := env.Service.Pay(ctx, m.acked[tok], tok)
				if err != nil || o.Status != sale.StatusPaid {
					rt.Fatalf("pay %s: %v, %v", tok, o.Status, err)
				}
				m.paid[tok] = true
			},
			"expire": func(rt *rapid.T) {
				env.Drain(a.ID)
				clock.Advance(2 * time.Minute)
				if _, err := env.Service.SweepExpired(ctx, 1000); err != nil {
					rt.Fatalf("sweep: %v", err)
				}
				for tok := range m.acked {
					if !m.paid[tok] && !m.dead[tok] { // a dead letter has no order to expire
						m.cancelled[tok] = true
					}
				}
			},
			"": func(rt *rapid.T) {
				if m.held() > m.stock {
					rt.Fatalf("%d units held, stock %d", m.held(), m.stock)
				}
				for _, u := range m.acked {
					if m.heldBy(u) > m.limit {
						rt.Fatalf("%s holds %d, limit %d", u, m.heldBy(u), m.limit)
					}
				}
				rem, err := env.Service.Remaining(ctx, a.ID)
				if err != nil {
					rt.Fatalf("remaining: %v", err)
				}
				if want := m.stock - m.held() - int64(len(m.owed)); rem != want {
					rt.Fatalf("gate has %d remaining; stock %d less %d held and %d owed is %d", rem, m.stock, m.held(), len(m.owed), want)
				}
			},
		})

		env.Drain(a.ID)
		giveBackOwed(rt, env, m)
		for tok, u := range m.acked {
			if m.dead[tok] {
				if o, err := env.Service.Order(ctx, u, tok); err == nil && o.Status != sale.StatusFailed {
					rt.Fatalf("dead-lettered grab %s has an order %s", tok, o.Status)
				}
				continue
			}
			o, err := env.Service.Order(ctx, u, tok)
			if err != nil {
				rt.Fatalf("acknowledged grab %s has no order: %v", tok, err)
			}
			want := sale.StatusCreated
			switch {
			case m.paid[tok]:
				want = sale.StatusPaid
			case m.cancelled[tok]:
				want = sale.StatusCancelled
			}
			if o.Status != want {
				rt.Fatalf("order %s is %s, want %s", tok, o.Status, want)
			}
		}
		if a.Kind == sale.KindRedPacket {
			checkShares(rt, env, a, m)
		}
		c, err := env.Store.Counts(ctx, a.ID)
		if err != nil {
			rt.Fatal(err)
		}
		dead := int64(len(m.dead))
		if c.Orders != int64(len(m.acked))-dead || c.Failed != 0 || c.DeadLetters != dead {
			rt.Fatalf("database has %+v; %d grabs were acknowledged, %d of them dead-lettered", c, len(m.acked), dead)
		}
		deadHeld := dead - int64(len(m.freed)) // in the gate, not in the database
		if c.Created+c.Paid != m.held()-deadHeld {
			rt.Fatalf("database holds %d units, the model %d", c.Created+c.Paid, m.held()-deadHeld)
		}
		if deadHeld > 0 {
			// The dead letters' units are held in the gate and by nobody in the database: the
			// reconcile gives them back.
			if rec, err := env.Service.Reconcile(ctx, a.ID); err != nil || !rec.Repaired || rec.Drift != -deadHeld {
				rt.Fatalf("reconcile with %d dead letters holding units = %+v, %v; want a drift of -%d repaired", deadHeld, rec, err, deadHeld)
			}
		}
		if rec, err := env.Service.Reconcile(ctx, a.ID); err != nil || !rec.OK {
			rt.Fatalf("reconcile after the sale = %+v, %v", rec, err)
		}
	})
}

// giveBackOwed runs the owed restocks (a sweeper's round) and checks every one came back.
func giveBackOwed(rt *rapid.T, env Env, m *model) {
	for {
		n, err := env.Service.ReleaseOwed(context.Background(), 100)
		if err != nil {
			rt.Fatalf("give back owed restocks: %v", err)
		}
		if n < 100 {
			break
		}
	}
	clear(m.owed)
}

// pickLive draws an acknowledged grab that is neither cancelled nor paid.
func pickLive(rt *rapid.T, m *model) (string, bool) {
	var live []string
	for tok := range m.acked {
		if !m.cancelled[tok] && !m.paid[tok] && !m.dead[tok] {
			live = append(live, tok)
		}
	}
	if len(live) == 0 {
		return "", false
	}
	// Map iteration order is random; sort for a reproducible draw.
	slices.Sort(live)
	return rapid.SampledFrom(live).Draw(rt, "order"), true
}

// checkShares verifies a red packet after its sale: every share won is at least a cent, no share
// is held twice, and once every share is held they sum to the total exactly.
func checkShares(rt *rapid.T, env Env, a sale.Activity, m *model) {
	ctx := context.Background()
	held := map[int64]bool{}
	var sum int64
	for tok, u := range m.acked {
		if m.dead[tok] {
			continue // no order: its share waits in the gate for a reconcile
		}
		o, err := env.Service.Order(ctx, u, tok)
		if err != nil {
			rt.Fatalf("order %s: %v", tok, err)
		}
		if o.AmountCents < 1 {
			rt.Fatalf("share %d of order %s is %d cents", o.Share, tok, o.AmountCents)
		}
		if !o.Status.Holds() {
			continue
		}
		if held[o.Share] {
			rt.Fatalf("share %d is held twice", o.Share)
		}
		held[o.Share] = true
		sum += o.AmountCents
	}
	if sum > a.TotalCents {
		rt.Fatalf("held shares sum to %d cents, more than the total %d", sum, a.TotalCents)
	}
	if int64(len(held)) == a.Stock && sum != a.TotalCents {
		rt.Fatalf("all %d shares are held and sum to %d cents, want the total %d", a.Stock, sum, a.TotalCents)
	}
}

// Sink is the outbox sink of the stores the suites open: every order change writes its event
// for it.
const Sink = "suite"

// ExactMax is how many shares a test activity's leaderboard keeps exactly; beyond it the
// leaderboard is a histogram.
const ExactMax = 2_000
