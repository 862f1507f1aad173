// Package health watches the dependencies a node calls (the stock gate's Redis or journal, the
// database) and keeps the system failing closed and fast when one of them fails. Every call goes
// through a Guard: a circuit breaker (github.com/sony/gobreaker) that stops calling a dependency
// that keeps failing and answers sale.ErrBusy at once, plus a rolling record of the calls' error
// rate and latency. A Monitor turns the guards' records into the node's health level:
//
//   - normal:   everything answers, and fast;
//   - warning:  a dependency is slow (its mean latency over the last 10 s above its threshold:
//     50 ms for the gate, 200 ms for the database): non-core work is shed;
//   - degraded: a dependency fails (error rate above 5 % over the last 10 s, or its breaker open):
//     only the sale itself is served, and a grab that cannot be decided is 503 BUSY.
//
// A dependency that changes shape (a Redis Cluster failing over or moving a slot, a Sentinel
// naming a new master) is not failing: a guard given its Topology retries what was refused
// within the call's deadline, keeps those errors out of the breaker and the error rate, and
// reports the dependency moving (warning) until a call succeeds, unless it stays unreachable for
// longer than the failover grace.
package breaker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"seckill/internal/sale"
)

// Level is a node's health.
type Level int

// The levels, in order of trouble.
const (
	Normal Level = iota
	Warning
	Degraded
)

func (l Level) String() string {
	switch l {
	case Normal:
		return "normal"
	case Warning:
		return "warning"
	default:
		return "degraded"
	}
}

// MarshalText writes the level's name.
func (l Level) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText reads a level's name, so a client can decode what MarshalText wrote.
func (l *Level) UnmarshalText(b []byte) error {
	for _, c := range []Level{Normal, Warning, Degraded} {
		if string(b) == c.String() {
			*l = c
			return nil
		}
	}
	return fmt.Errorf("health level %q: want normal, warning or degraded", b)
}

// Thresholds of the levels and the breaker. The zero value of a field takes its default.
type Thresholds struct {
	SlowAfter  time.Duration // mean latency above which a dependency is slow (warning)
	FailRate   float64       // error rate above which a dependency is failing (degraded); default 0.05
	MinCalls   int           // calls in the window before the error rate counts; default 20
	OpenFor    time.Duration // how long the breaker stays open before it lets a probe through; default DefaultOpenFor
	TripAfter  int           // consecutive failures that open the breaker; default 5
	TripRate   float64       // error rate (with MinCalls) that opens the breaker; default 0.5
	CallWithin time.Duration // the deadline of one call; 0: none (the client's own timeouts apply)
	// FailoverGrace is how long a dependency's topology events (see Topology) are taken for a
	// failover in progress: past it, with no success since the first, they count as failures
	// and open the breaker. Default 20 s.
	FailoverGrace time.Duration
}

// Topology tells a dependency's topology events from its failures. moving says err is one (a
// refused connection to a node that fails over, a slot redirected or being migrated, a cluster
// without a master for a slot); retry, that the call was not carried out and may be sent again
// as it is, whatever it does. A Topology may react (reload the client's view of the cluster).
type Topology func(err error) (moving, retry bool)

func (t Thresholds) withDefaults() Thresholds {
	if t.FailRate == 0 {
		t.FailRate = 0.05
	}
	if t.MinCalls == 0 {
		t.MinCalls = 20
	}
	if t.OpenFor == 0 {
		t.OpenFor = DefaultOpenFor
	}
	if t.TripAfter == 0 {
		t.TripAfter = 5
	}
	if t.TripRate == 0 {
		t.TripRate = 0.5
	}
	if t.FailoverGrace == 0 {
		t.FailoverGrace = 20 * time.Second
	}
	return t
}

// DefaultOpenFor is how long a tripped breaker answers BUSY before it lets a probe through. A
// probe that met the fault just before the heal opens it again, so a dependency back serves the
// crowd after up to this and one probe's round trip: short, so that a node serves within a second
// of the heal (the nemesis holds it to that). It was 2 s, and a database back was answered BUSY
// 3.3 s after its restart (Sentinel seed 10); then 0.5 s with three probes, all of which had to
// succeed, and a node refused for 1.04 s after a latency healed on a loaded machine, the slowest
// probe taking half a second (Cluster seed 148). While the dependency stays down this costs one
// probe a time, refused at once by a server that is down (a hung one holds it to the call's
// deadline, and every other call is BUSY at once meanwhile).
const DefaultOpenFor = 250 * time.Millisecond

// probes is how many calls a half-open breaker lets through at a time: one, whose success closes
// it (as Hystrix and Polly do). gobreaker closes a half-open breaker only once as many calls in a
// row succeeded as it let through, and refuses every other call until then, so with three the
// slowest of them held a node refusing after its dependency came back.
const probes = 1

// Database names the database's guard: the dependency whose failure sheds the leaderboards.
const Database = "database"

// Defaults for the two kinds of dependency.
var (
	GateThresholds     = Thresholds{SlowAfter: 50 * time.Millisecond, CallWithin: time.Second}
	DatabaseThresholds = Thresholds{SlowAfter: 200 * time.Millisecond, CallWithin: 5 * time.Second}
)

// window is how far back a guard's record reaches, in one-second buckets.
const window = 10

// Guard protects the calls to one dependency.
type Guard struct {
	*guardState
	// prompt runs deadline-bound calls in the caller's goroutine, bounded by their context
	// alone: for a callee that is Prompt (see callee).
	prompt bool
}

// Prompt is implemented by an adapter every call of which returns once its context ends (its
// deadline passes, or its caller gives up), with an error. A guard runs such a callee's calls
// in the caller's goroutine and bounds them with the context's deadline alone; any other
// callee's calls run on a goroutine of their own, which the guard abandons at the deadline so
// that the caller is answered even when the callee does not look at its context. That
// goroutine, its channel and its stack cost an embedded grab more than the rest of its guard
// (docs/BENCHMARKS.md §13).
type Prompt interface{ Prompt() }

// callee is g for calls to p: the same breaker and record, run in the caller's goroutine if p
// is Prompt.
func (g *Guard) callee(p any) *Guard {
	if _, ok := p.(Prompt); ok {
		return &Guard{guardState: g.guardState, prompt: true}
	}
	return g
}

// guardState is a guard's breaker and record, shared by its views (callee).
type guardState struct {
	name string
	th   Thresholds
	now  func() time.Time
	cb   *gobreaker.TwoStepCircuitBreaker[struct{}]
	topo Topology
	// movingSince is when (Unix ns, on now) the topology events began that no success has
	// followed yet; 0 when none has.
	movingSince atomic.Int64
	// log hears the breaker's changes of state, each with the last failure before it (lastFailure):
	// why a breaker opened is the first thing an operator asks.
	log         atomic.Pointer[slog.Logger]
	lastFailure atomic.Pointer[string]

	mu      sync.Mutex
	buckets [window]bucket
}

type bucket struct {
	sec      int64 // the Unix second it counts
	calls    int64
	failures int64
	latency  time.Duration // summed
}

// NewGuard returns a guard named name (it names the dependency in /readyz and /metrics).
func NewGuard(name string, th Thresholds, now func() time.Time) *Guard {
	pauses.start()
	th = th.withDefaults()
	g := &Guard{guardState: &guardState{name: name, th: th, now: now}}
	g.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:         name,
		MaxRequests:  probes,
		Interval:     window * time.Second,
		BucketPeriod: time.Second,
		Timeout:      th.OpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return int(c.ConsecutiveFailures) >= th.TripAfter ||
				int(c.Requests) >= th.MinCalls && float64(c.TotalFailures) > th.TripRate*float64(c.Requests)
		},
		IsSuccessful: func(err error) bool { return !Failed(err) },
		IsExcluded:   func(err error) bool { return errors.Is(err, context.Canceled) || errors.Is(err, errMoving) },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			l := g.log.Load()
			if l == nil {
				return
			}
			cause := ""
			if p := g.lastFailure.Load(); p != nil {
				cause = *p
			}
			lvl := slog.LevelInfo // closed again
			switch {
			case to == gobreaker.StateOpen && from == gobreaker.StateClosed:
				lvl = slog.LevelError // the node answers BUSY for everything the dependency serves
			case to == gobreaker.StateOpen, to == gobreaker.StateHalfOpen:
				lvl = slog.LevelWarn // a probe met the fault again: still open, every OpenFor
			}
			l.Log(context.Background(), lvl, "breaker", "dependency", name, "from", from.String(), "to", to.String(),
				"last_failure", cause)
		},
	})
	return g
}

// LogTo makes g log its breaker's changes of state to l, each with the last failure it counted.
func (g *Guard) LogTo(l *slog.Logger) *Guard {
	g.log.Store(l)
	return g
}

// WithTopology makes g tell t's topology events from failures (see Topology).
func (g *Guard) WithTopology(t Topology) *Guard {
	g.topo = t
	return g
}

// errMoving marks, for the breaker, a topology event within the failover grace.
var errMoving = errors.New("the dependency is changing its topology")

// Failed reports whether err says the dependency failed, rather than answered: the sale's
// answers (sold out, not found, ...) are successes for the breaker, and a caller that gave up
// (context.Canceled) is neither.
func Failed(err error) bool {
	return err != nil && !sale.IsVerdict(err) && !errors.Is(err, context.Canceled)
}

// Name is the dependency's name.
func (g *Guard) Name() string { return g.name }

// Do runs call unless the breaker is open (then it answers sale.ErrBusy at once), bounded by
// the guard's deadline, and records its outcome and latency.
func (g *Guard) Do(ctx context.Context, call func(ctx context.Context) error) error {
	_, err := Call(ctx, g, func(ctx context.Context) (struct{}, error) { return struct{}{}, call(ctx) })
	return err
}

// Slow is Do without the deadline, for the calls whose time grows with an activity's size
// (loading a gate, reading its state): they are guarded, but only the client's timeouts bound
// them.
func (g *Guard) Slow(ctx context.Context, call func(ctx context.Context) error) error {
	_, err := guarded(ctx, g, slowWithin, func(ctx context.Context) (struct{}, error) { return struct{}{}, call(ctx) })
	return err
}

// Call runs f through g like Guard.Do and returns its result.
//
// The deadline does not rely on the dependency's client honouring its context (go-redis's
// automatic pipelining runs batches on a context of its own): when it passes, the caller is
// answered BUSY at once and f finishes in the background, its result dropped. Such a call may
// still have taken effect (a grab that took its unit): the client learns its fate by retrying
// with the same Idempotency-Key, and an order nobody claims expires unpaid and restocks.
func Call[T any](ctx context.Context, g *Guard, f func(ctx context.Context) (T, error)) (T, error) {
	return guarded(ctx, g, g.th.CallWithin, f)
}

// slowWithin is the deadline of a slow call (see Guard.Slow): none, and no probe of a half-open
// breaker.
const slowWithin = -1

// deadlineOf is the deadline guarded gives a call of within: none for a slow call.
func deadlineOf(within time.Duration) time.Duration {
	return max(within, 0)
}

func guarded[T any](ctx context.Context, g *Guard, within time.Duration, f func(ctx context.Context) (T, error)) (T, error) {
	var zero T
	if within == slowWithin && g.cb.State() == gobreaker.StateHalfOpen {
		// A slow call (a rebuild, a load, a repair, a listing: seconds to minutes) is no probe:
		// a half-open breaker lets one call through and closes on its success, so a slow call as
		// that probe held it half-open, answering every other call BUSY ("too many requests"),
		// for as long as it ran. It runs beside the probe, its outcome counted in the record but
		// not by the breaker; nor is it refused, as the call that probes may wait for it (a
		// queue that lists its streams before its worker places orders).
		start := g.now()
		v, err := retry(ctx, g, f, &trail{})
		g.record(start, g.now().Sub(start), Failed(err))
		if Failed(err) && !errors.Is(err, sale.ErrBusy) {
			err = fmt.Errorf("%w: %s: %w", sale.ErrBusy, g.name, err)
		}
		return v, err
	}
	done, err := g.cb.Allow()
	if err != nil {
		return zero, fmt.Errorf("%w: %s: %v", sale.ErrBusy, g.name, err)
	}
	within = deadlineOf(within)
	start, began := g.now(), time.Now()
	var v T
	tr := &trail{}
	switch {
	case within <= 0:
		v, err = retry(ctx, g, f, tr)
	case g.prompt:
		callCtx, cancel := context.WithTimeout(ctx, within)
		v, err = retry(callCtx, g, f, tr)
		if Failed(err) && errors.Is(callCtx.Err(), context.DeadlineExceeded) {
			v, err = zero, tr.abandoned(callCtx.Err()) // as a call abandoned at its deadline answers
		}
		cancel()
	default:
		callCtx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		type result struct {
			v   T
			err error
		}
		res := make(chan result, 1)
		go func() {
			v, err := retry(callCtx, g, f, tr)
			res <- result{v, err}
		}()
		select {
		case r := <-res:
			v, err = r.v, r.err
		case <-callCtx.Done():
			v, err = zero, tr.abandoned(callCtx.Err())
		}
	}
	// A call abandoned at its deadline while its tries met a failover is the failover's, as is
	// one whose tries gave up: counted as failing only past the grace.
	moving := tr.moving.Load()
	if errors.Is(ctx.Err(), context.Canceled) {
		// The caller gave up (a client hung up): that says nothing of the dependency.
		done(context.Canceled)
		return v, err
	}
	now := g.now()
	if g.stalled(within, now.Sub(start), began, err) {
		// Nor does a call this process held up: it is answered busy, and not counted.
		done(context.Canceled)
		if !errors.Is(err, sale.ErrBusy) {
			err = fmt.Errorf("%w: %s: %w", sale.ErrBusy, g.name, err)
		}
		return v, err
	}
	counted := err
	switch {
	case moving && g.inGrace(now):
		counted = errMoving
	case !Failed(err):
		g.movingSince.Store(0)
	}
	failed := Failed(counted) && counted != errMoving
	g.record(start, now.Sub(start), failed)
	if failed {
		why := err.Error()
		g.lastFailure.Store(&why)
	}
	done(counted)
	if Failed(err) && !errors.Is(err, sale.ErrBusy) {
		// A failure the adapter did not name (a driver's error, a deadline): the dependency
		// is unavailable, and the client is told so.
		err = fmt.Errorf("%w: %s: %w", sale.ErrBusy, g.name, err)
	}
	return v, err
}

// stalled reports whether a call that failed, begun at began (the machine's clock) and taking
// took (the guard's), was held up by its own process rather than by the dependency. Every call in
// flight across a stop of the process (SIGSTOP, a VM paused, a starved scheduler) fails at once
// when it runs again; counted, they opened the breaker of a node the moment it came back, for
// the dependency's fault. Such a call overlapped a pause the watch saw (or is seeing: its ticks
// stopped), or, on its own goroutine, took more than twice its deadline, the guard answering it
// by a timer that fired late. A Prompt callee's calls take what the callee takes: only a pause
// judges them.
func (g *Guard) stalled(within, took time.Duration, began time.Time, err error) bool {
	return Failed(err) && (pauses.overlaps(began) || !g.prompt && within > 0 && took > 2*within)
}

// pauses watches this process for pauses: a goroutine ticks every pauseTick, and a gap of more
// than pauseGap between two ticks is a time the process did not run.
var pauses pauseWatch

const (
	pauseTick = 100 * time.Millisecond
	pauseGap  = time.Second // far above a scheduler's delay under load, below the nemesis's stops
)

type pauseWatch struct {
	once sync.Once
	last atomic.Int64 // the last tick, Unix ns
	// until is the end of the latest pause seen, Unix ns.
	until atomic.Int64
}

// start starts the watch, once.
func (w *pauseWatch) start() {
	w.once.Do(func() {
		w.last.Store(time.Now().UnixNano())
		go func() {
			t := time.NewTicker(pauseTick)
			for now := range t.C {
				n := now.UnixNano()
				if prev := w.last.Swap(n); n-prev > int64(pauseGap) {
					w.until.Store(n)
				}
			}
		}()
	})
}

// overlaps reports whether a call begun at began, and ending now, overlapped a pause: one that
// ended after it began, or one going on (no tick for pauseGap: the process runs again, and the
// watch has not yet).
func (w *pauseWatch) overlaps(began time.Time) bool {
	now := time.Now().UnixNano()
	if last := w.last.Load(); last != 0 && now-last > int64(pauseGap) {
		return true
	}
	return w.until.Load() > began.UnixNano()
}

// trail is what a call's tries have met so far, read when the call is abandoned at its deadline
// while they go on: whether the last error was a topology event (moving), and that error.
type trail struct {
	moving atomic.Bool
	last   atomic.Pointer[error]
}

// met notes err, the error of a try; moving says it was a topology event.
func (t *trail) met(err error, moving bool) {
	t.last.Store(&err)
	t.moving.Store(moving)
}

// abandoned is the error of a call abandoned at its deadline (deadline, the context's error): it
// says what the tries met before, if they met anything.
func (t *trail) abandoned(deadline error) error {
	if p := t.last.Load(); p != nil {
		return fmt.Errorf("%w, after: %v", deadline, *p)
	}
	return deadline
}

// retry runs f and, while its error is a topology event that left the call undone, runs it
// again after a short pause, as long as ctx's deadline (or, without one, maxRetryFor) leaves
// room: the cluster names a new master or finishes moving a slot within the call's time, and
// the call goes through instead of failing. tr notes each error and whether it was a topology
// event: tr.moving says whether the last one was.
func retry[T any](ctx context.Context, g *Guard, f func(ctx context.Context) (T, error), tr *trail) (T, error) {
	v, err := f(ctx)
	if g.topo == nil || err == nil || sale.IsVerdict(err) {
		return v, err
	}
	began := time.Now()
	pause := firstPause
	for {
		moving, again := g.topo(err)
		tr.met(err, moving)
		if !moving {
			return v, err
		}
		left := maxRetryFor - time.Since(began)
		if dl, ok := ctx.Deadline(); ok {
			left = time.Until(dl)
		}
		if !again || left < pause+retryMargin {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(pause):
		}
		pause = min(2*pause, maxPause)
		if v, err = f(ctx); err == nil || sale.IsVerdict(err) {
			tr.moving.Store(false)
			return v, err
		}
	}
}

// The pauses between the retries of a call refused by a topology event: short, as a failover
// ends at a moment nobody can tell in advance and the first call after it should go through.
// retryMargin is the time left for the last try before the deadline; maxRetryFor bounds the
// retries of a call without a deadline.
const (
	firstPause  = 20 * time.Millisecond
	maxPause    = 200 * time.Millisecond
	retryMargin = 50 * time.Millisecond
	maxRetryFor = 5 * time.Second
)

// inGrace reports whether the topology events that no success has followed began within the
// failover grace, noting now as their beginning if they begin now.
func (g *Guard) inGrace(now time.Time) bool {
	since := g.movingSince.Load()
	if since == 0 {
		g.movingSince.CompareAndSwap(0, now.UnixNano())
		return true
	}
	return now.UnixNano()-since < int64(g.th.FailoverGrace)
}

// Moving reports whether the dependency's last calls met topology events, within the failover
// grace, that no success has followed yet.
func (g *Guard) Moving() bool {
	since := g.movingSince.Load()
	return since != 0 && g.now().UnixNano()-since < int64(g.th.FailoverGrace)
}

func (g *Guard) record(at time.Time, d time.Duration, failed bool) {
	sec := at.Unix()
	g.mu.Lock()
	b := &g.buckets[sec%window]
	if b.sec != sec {
		*b = bucket{sec: sec}
	}
	b.calls++
	b.latency += d
	if failed {
		b.failures++
	}
	g.mu.Unlock()
}

// Report is what a guard saw over the last 10 s, and its breaker's state.
type Report struct {
	Name      string  `json:"name"`
	Level     Level   `json:"level"`
	Breaker   string  `json:"breaker"` // closed, half-open, open
	Calls     int64   `json:"calls"`
	ErrorRate float64 `json:"error_rate"`
	MeanMS    float64 `json:"mean_latency_ms"`
	// Moving says the dependency is changing its topology (a failover, a slot moving): its
	// refusals are retried and not counted as failures, and the level is warning meanwhile.
	Moving bool          `json:"moving"`
	mean   time.Duration // MeanMS as a duration
}

// Report summarises the guard's window at now.
func (g *Guard) Report() Report {
	now := g.now().Unix()
	var calls, failures int64
	var latency time.Duration
	g.mu.Lock()
	for _, b := range g.buckets {
		if b.sec > now-window && b.sec <= now {
			calls += b.calls
			failures += b.failures
			latency += b.latency
		}
	}
	g.mu.Unlock()
	r := Report{Name: g.name, Breaker: g.cb.State().String(), Calls: calls, Moving: g.Moving()}
	if calls > 0 {
		r.ErrorRate = float64(failures) / float64(calls)
		r.mean = latency / time.Duration(calls)
		r.MeanMS = float64(r.mean) / float64(time.Millisecond)
	}
	switch {
	case g.cb.State() != gobreaker.StateClosed,
		calls >= int64(g.th.MinCalls) && r.ErrorRate > g.th.FailRate:
		r.Level = Degraded
	case calls > 0 && g.th.SlowAfter > 0 && r.mean > g.th.SlowAfter, r.Moving:
		r.Level = Warning
	}
	return r
}

// Monitor is a node's set of guards.
type Monitor struct {
	guards []*Guard
	// level caches the last level computed, and when (Unix ns), for the hot path.
	level, at atomic.Int64
}

// NewMonitor watches guards.
func NewMonitor(guards ...*Guard) *Monitor { return &Monitor{guards: guards} }

// levelFresh is how long Level trusts the last level it computed.
const levelFresh = 100 * time.Millisecond

// Status is the node's level and each dependency's report.
type Status struct {
	Level        Level    `json:"level"`
	Dependencies []Report `json:"dependencies"`
}

// Status reports the node's health: the worst level of its dependencies.
func (m *Monitor) Status() Status {
	if m == nil {
		return Status{Dependencies: []Report{}}
	}
	st := Status{Dependencies: make([]Report, 0, len(m.guards))}
	for _, g := range m.guards {
		r := g.Report()
		st.Dependencies = append(st.Dependencies, r)
		st.Level = max(st.Level, r.Level)
	}
	return st
}

// LevelOf is the level of the dependency named name alone (normal if it is not watched).
func (m *Monitor) LevelOf(name string) Level {
	if m == nil {
		return Normal
	}
	for _, g := range m.guards {
		if g.name == name {
			return g.Report().Level
		}
	}
	return Normal
}

// Level is Status().Level, computed at most every 100 ms: the grab path asks it on every request.
func (m *Monitor) Level() Level {
	if m == nil {
		return Normal
	}
	now := time.Now().UnixNano()
	if now-m.at.Load() < int64(levelFresh) {
		return Level(m.level.Load())
	}
	l := m.Status().Level
	m.level.Store(int64(l))
	m.at.Store(now)
	return l
}
