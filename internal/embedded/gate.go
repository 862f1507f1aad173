// Package memory is the embedded stock gate and queue: the single-binary default. The gate
// decides every grab in process, atomically per activity, and answers only once the grab is
// group-committed: placed as an order in the database's transaction (Placing) or, when the
// database cannot take it, written to a sale.Journal (the SQLite store), whose grabs the queue
// hands to the worker. After a restart the gate is rebuilt from the journal and the orders.
package embedded

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"seckill/internal/sale"
	"seckill/internal/tracing"
)

var _ sale.Gate = (*Gate)(nil)

// Gate is the in-process stock gate.
type Gate struct {
	mu     sync.RWMutex
	acts   map[string]*activity
	waves  map[string]*waves // activity id -> its reservers, apart from acts: a load leaves them
	commit *committer[sale.Grab]
}

// waves are a reservation sale's reservers with their waves (sale.Waves).
type waves struct {
	mu     sync.RWMutex
	of     map[string]int64 // user -> wave
	sealed bool
}

// activity is the gate's state for one sale. mu guards everything but soldOut, a hint read
// without the lock so that the crowd after the last unit is turned away cheaply, and a, the
// revision of the activity the gate holds, which changes under mu (Revise) and is read without
// it too.
type activity struct {
	a       atomic.Pointer[sale.Activity]
	soldOut atomic.Bool

	mu        sync.Mutex
	remaining int64
	held      map[string]int64   // user -> units held
	keyed     map[string]*answer // user + "\x00" + idempotency key -> first answer
	holding   map[string]bool    // the tokens of the grabs that hold a unit: a release gives back only these
	version   int64              // counts every change of the units or holdings: what Repair checks
	shares    []sale.Share       // red packet: free shares, taken from the end
	passes    map[string]pass    // one-time path tokens not yet spent
	issued    int                // passes issued since expired ones were last swept
}

// pass is a path token's owner and end. Spent passes are deleted.
type pass struct {
	user    string
	expires time.Time
}

// answer is the outcome of a grab, shared with retries of the same idempotency key that arrive
// while it is being committed.
type answer struct {
	grab sale.Grab
	err  error
	done chan struct{}
}

// NewGate returns a gate that makes grabs durable with w (a sale.Journal, or a Placing that
// places them as orders), in batches of at most maxBatch, and calls committed after each batch
// (the queue's wake-up, for a journal). Close it to flush.
func NewGate(w Writer, maxBatch int, committed func()) *Gate {
	return &Gate{acts: map[string]*activity{}, waves: map[string]*waves{}, commit: newCommitter(w.AppendGrabs, maxBatch, committed)}
}

// Close stops taking grabs, waits for the grabs already taken to be committed, and stops.
func (g *Gate) Close() error { return g.commit.close() }

// Load replaces the gate's state for a with st.
func (g *Gate) Load(ctx context.Context, a sale.Activity, st sale.GateState) error {
	act, err := newActivity(a, st)
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.acts[a.ID] = act
	g.mu.Unlock()
	return nil
}

// newActivity is a's state in the gate, holding st.
func newActivity(a sale.Activity, st sale.GateState) (*activity, error) {
	act := &activity{
		held:    map[string]int64{},
		keyed:   map[string]*answer{},
		holding: map[string]bool{},
		passes:  map[string]pass{},
	}
	for _, h := range st.Held {
		act.held[h.UserID]++
		act.holding[h.Token] = true
	}
	for _, k := range st.Keyed {
		done := make(chan struct{})
		close(done)
		act.keyed[keyOf(k.UserID, k.IdempotencyKey)] = &answer{grab: k, done: done}
	}
	a.Revision = max(a.Revision, 1) // as the database numbers them
	act.a.Store(&a)
	if a.Kind == sale.KindRedPacket {
		act.shares = append([]sale.Share(nil), st.Shares...)
		// Pop from the end in index order, so shares go out as they were split.
		slices.Reverse(act.shares)
	}
	if act.remaining = st.Remaining(a); act.remaining < 0 {
		return nil, fmt.Errorf("load activity %s: %d units held of a stock of %d", a.ID, len(st.Held), a.Stock)
	}
	act.soldOut.Store(act.remaining == 0)
	return act, nil
}

// Repair implements sale.Gate: read runs without the activity's lock, and its state replaces the
// activity's only if no grab or release changed it meanwhile. The unspent passes are kept.
func (g *Gate) Repair(ctx context.Context, a sale.Activity, read func(ctx context.Context, remaining int64) (sale.GateState, bool, error)) (bool, error) {
	act, err := g.activity(a.ID)
	if err != nil {
		return false, err
	}
	act.mu.Lock()
	version, remaining := act.version, act.remaining
	act.mu.Unlock()
	st, repair, err := read(ctx, remaining)
	if err != nil || !repair {
		return false, err
	}
	fresh, err := newActivity(a, st)
	if err != nil {
		return false, err
	}
	act.mu.Lock()
	defer act.mu.Unlock()
	if act.version != version || act.a.Load().Revision > max(a.Revision, 1) {
		return false, fmt.Errorf("repair activity %s: %w", a.ID, sale.ErrChanged)
	}
	act.remaining, act.held, act.keyed, act.holding, act.shares = fresh.remaining, fresh.held, fresh.keyed, fresh.holding, fresh.shares
	act.a.Store(fresh.a.Load())
	act.version++
	act.soldOut.Store(act.remaining == 0)
	return true, nil
}

// Revise implements sale.Gate.
func (g *Gate) Revise(_ context.Context, a sale.Activity, add int64) error {
	act, err := g.activity(a.ID)
	if err != nil {
		return err
	}
	act.mu.Lock()
	defer act.mu.Unlock()
	switch cur := act.a.Load().Revision; {
	case cur >= a.Revision:
		return nil // given already
	case cur != a.Revision-1:
		return fmt.Errorf("revise activity %s to %d: the gate holds revision %d: %w", a.ID, a.Revision, cur, sale.ErrChanged)
	}
	act.remaining += add
	act.version++
	act.a.Store(&a)
	act.soldOut.Store(act.remaining == 0)
	return nil
}

// Warm implements sale.Gate.
func (g *Gate) Warm(ctx context.Context, a sale.Activity, st sale.GateState) (bool, error) {
	g.mu.RLock()
	_, loaded := g.acts[a.ID]
	g.mu.RUnlock()
	if loaded {
		return false, nil
	}
	return true, g.Load(ctx, a, st)
}

func keyOf(user, key string) string { return user + "\x00" + key }

func (g *Gate) activity(id string) (*activity, error) {
	g.mu.RLock()
	act := g.acts[id]
	g.mu.RUnlock()
	if act == nil {
		return nil, sale.ErrNotFound
	}
	return act, nil
}

// Drop implements sale.Gate.
func (g *Gate) Drop(_ context.Context, a sale.Activity) error {
	g.mu.Lock()
	delete(g.acts, a.ID)
	delete(g.waves, a.ID)
	g.mu.Unlock()
	return nil
}

// wavesOf returns the reservers of activity id, made empty when create and there are none.
func (g *Gate) wavesOf(id string, create bool) *waves {
	g.mu.RLock()
	w := g.waves[id]
	g.mu.RUnlock()
	if w != nil || !create {
		return w
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if w = g.waves[id]; w == nil {
		w = &waves{of: map[string]int64{}}
		g.waves[id] = w
	}
	return w
}

// HoldWaves implements sale.Waves.
func (g *Gate) HoldWaves(_ context.Context, a sale.Activity, set map[string]int64) error {
	w := g.wavesOf(a.ID, true)
	w.mu.Lock()
	defer w.mu.Unlock()
	maps.Copy(w.of, set)
	return nil
}

// SealWaves implements sale.Waves.
func (g *Gate) SealWaves(_ context.Context, a sale.Activity, _ int64) error {
	w := g.wavesOf(a.ID, true)
	w.mu.Lock()
	w.sealed = true
	w.mu.Unlock()
	return nil
}

// WavesSealed implements sale.Waves.
func (g *Gate) WavesSealed(_ context.Context, a sale.Activity) (bool, error) {
	w := g.wavesOf(a.ID, false)
	if w == nil {
		return false, nil
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.sealed, nil
}

// admit checks a grab of user at now from a, a reservation sale (sale.Activity.Admit).
func (g *Gate) admit(a *sale.Activity, user string, now time.Time) error {
	w := g.wavesOf(a.ID, false)
	if w == nil {
		return a.Admit(false, 0, now)
	}
	w.mu.RLock()
	sealed, wave := w.sealed, w.of[user]
	w.mu.RUnlock()
	return a.Admit(sealed, wave, now)
}

// Grab implements sale.Gate.
func (g *Gate) Grab(ctx context.Context, a sale.Activity, r sale.GrabRequest) (sale.Grab, error) {
	act, err := g.activity(a.ID)
	if err != nil {
		return sale.Grab{}, err
	}
	if cur := act.a.Load(); cur.Revision != max(a.Revision, 1) {
		return sale.Grab{}, fmt.Errorf("activity %s: the gate holds revision %d, not %d: %w", a.ID, cur.Revision, a.Revision, sale.ErrStale)
	} else if err := cur.Open(r.Now); err != nil {
		return sale.Grab{}, err
	} else if cur.Admission == sale.AdmitReservation {
		if err := g.admit(cur, r.UserID, r.Now); err != nil {
			return sale.Grab{}, err
		}
	}
	if r.IdempotencyKey == "" && r.Pass == "" && act.soldOut.Load() {
		return sale.Grab{}, sale.ErrSoldOut
	}

	act.mu.Lock()
	var key string
	if r.IdempotencyKey != "" {
		key = keyOf(r.UserID, r.IdempotencyKey)
		if first := act.keyed[key]; first != nil {
			act.mu.Unlock()
			return first.wait(ctx)
		}
	}
	cur := act.a.Load()
	if cur.Revision != max(a.Revision, 1) { // revised since the check above
		act.mu.Unlock()
		return sale.Grab{}, fmt.Errorf("activity %s: the gate holds revision %d, not %d: %w", a.ID, cur.Revision, a.Revision, sale.ErrStale)
	}
	if err := act.spend(r); err != nil {
		act.mu.Unlock()
		return sale.Grab{}, err
	}
	if act.held[r.UserID] >= cur.PerUserLimit {
		act.mu.Unlock()
		return sale.Grab{}, sale.ErrAlreadyBought
	}
	if act.remaining == 0 {
		act.soldOut.Store(true)
		act.mu.Unlock()
		return sale.Grab{}, sale.ErrSoldOut
	}
	grab := sale.Grab{
		Token:          sale.NewGrabToken(r.Now),
		ActivityID:     r.ActivityID,
		UserID:         r.UserID,
		IdempotencyKey: r.IdempotencyKey,
		AmountCents:    cur.PriceCents,
		At:             r.Now,
		Trace:          tracing.Parent(ctx), // the worker's spans continue the click's trace
	}
	if cur.Kind == sale.KindRedPacket {
		s := act.shares[len(act.shares)-1]
		act.shares = act.shares[:len(act.shares)-1]
		grab.Share, grab.AmountCents = s.Index, s.AmountCents
	}
	act.remaining--
	act.version++
	act.held[r.UserID]++
	act.holding[grab.Token] = true
	ans := &answer{grab: grab, done: make(chan struct{})}
	if key != "" {
		act.keyed[key] = ans
	}
	act.mu.Unlock()

	// The unit is taken; now make it durable. The batch's outcome settles the answer, whether or
	// not its caller still waits: if the journal refuses, the unit goes back as if never taken.
	// Until then retries of the same key wait on ans.done.
	g.commit.append(grab, func(err error) {
		if err != nil {
			act.mu.Lock()
			act.undo(ans.grab, key)
			act.mu.Unlock()
			ans.grab, ans.err = sale.Grab{}, fmt.Errorf("%w: journal: %v", sale.ErrBusy, err)
		}
		close(ans.done)
	})
	return ans.wait(ctx)
}

// wait returns the answer once it is settled, or, if ctx ends first, an error: the grab then goes
// on to its outcome without its caller, and a retry with its idempotency key learns it.
func (ans *answer) wait(ctx context.Context) (sale.Grab, error) {
	select {
	case <-ans.done:
		return ans.grab, ans.err
	case <-ctx.Done():
		// %v, not %w: breaker.Failed must not take this busy grab for a caller that gave up.
		return sale.Grab{}, fmt.Errorf("%w: journal: the grab's commit outlasted its caller: %v", sale.ErrBusy, ctx.Err())
	}
}

// Prompt marks the gate breaker.Prompt: every call returns once its context ends, a grab whose
// commit is slower than its caller's deadline included.
func (g *Gate) Prompt() {}

// spend spends the pass of r, or refuses a grab without one from an activity that requires it;
// the caller holds act.mu.
func (act *activity) spend(r sale.GrabRequest) error {
	if r.Pass == "" {
		if act.a.Load().PassAtTheGate() {
			return sale.ErrChallengeRequired
		}
		return nil
	}
	return act.spendPass(r.UserID, r.Pass, r.Now)
}

// spendPass spends userID's pass token at now; the caller holds act.mu.
func (act *activity) spendPass(userID, token string, now time.Time) error {
	p, ok := act.passes[token]
	if !ok || p.user != userID || !now.Before(p.expires) {
		return fmt.Errorf("%w: the path token is unknown, spent, expired or someone else's", sale.ErrChallengeRequired)
	}
	delete(act.passes, token)
	return nil
}

// SpendPass implements sale.Gate.
func (g *Gate) SpendPass(ctx context.Context, a sale.Activity, userID, token string, now time.Time) error {
	act, err := g.activity(a.ID)
	if err != nil {
		return err
	}
	act.mu.Lock()
	defer act.mu.Unlock()
	return act.spendPass(userID, token, now)
}

// IssuePass implements sale.Gate.
func (g *Gate) IssuePass(ctx context.Context, a sale.Activity, userID, token string, now, expires time.Time) error {
	act, err := g.activity(a.ID)
	if err != nil {
		return err
	}
	act.mu.Lock()
	defer act.mu.Unlock()
	if act.issued++; act.issued >= 1024 {
		// Forget the passes nobody spent, now and then, so abandoned ones cannot pile up.
		act.issued = 0
		for t, p := range act.passes {
			if !now.Before(p.expires) {
				delete(act.passes, t)
			}
		}
	}
	act.passes[token] = pass{user: userID, expires: expires}
	return nil
}

// undo gives back a unit taken for grab; the caller holds act.mu.
func (act *activity) undo(grab sale.Grab, key string) {
	delete(act.holding, grab.Token)
	act.remaining++
	act.version++
	if act.held[grab.UserID]--; act.held[grab.UserID] <= 0 {
		delete(act.held, grab.UserID)
	}
	if act.a.Load().Kind == sale.KindRedPacket {
		act.shares = append(act.shares, sale.Share{Index: grab.Share, AmountCents: grab.AmountCents})
	}
	if key != "" {
		delete(act.keyed, key)
	}
	act.soldOut.Store(false)
}

// Release implements sale.Gate.
func (g *Gate) Release(ctx context.Context, a sale.Activity, grab sale.Grab) error {
	act, err := g.activity(a.ID)
	if err != nil {
		return err // not loaded (archived, or ended before this start): the service decides
	}
	act.mu.Lock()
	defer act.mu.Unlock()
	// Only a grab that holds a unit gives one back, once: a release repeated, or of a grab the
	// gate was loaded without (its order already cancelled), changes nothing.
	if !act.holding[grab.Token] {
		return nil
	}
	// The buyer's idempotency key keeps its first answer: a retry sees the cancelled order
	// rather than winning again with a stale key.
	act.undo(grab, "")
	return nil
}

// Remaining implements sale.Gate.
func (g *Gate) Remaining(ctx context.Context, a sale.Activity) (int64, error) {
	act, err := g.activity(a.ID)
	if err != nil {
		return 0, err
	}
	act.mu.Lock()
	defer act.mu.Unlock()
	return act.remaining, nil
}
