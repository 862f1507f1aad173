package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"seckill/internal/sale"
)

// Coalescing (group commit on Redis). A flash crowd presses on one activity, whose keys live on
// one Redis core, and a script call per grab costs that core more in call overhead than in the
// grab itself. So the grabs of one activity that arrive together leave together: one call of
// grab.lua takes a batch and answers each grab as if it had run alone (its own token, its own
// idempotency, its own stream entry). Batches form by themselves: while InFlight calls of an
// activity are on their way, the grabs that arrive queue, and the next call takes them all (up
// to MaxBatch). A lone grab leaves at once, alone: there is no timer on the quiet path.

// Batching tunes the coalescing of a Gate's grabs.
type Batching struct {
	// MaxBatch is the most grabs one script call takes; 1 sends every grab on its own.
	MaxBatch int
	// InFlight is how many calls per activity may be on their way at once.
	InFlight int
	// Linger, when positive, holds a call that would leave with fewer than MaxBatch grabs for up
	// to that long, to gather more: throughput for latency. Zero by default.
	Linger time.Duration
}

// DefaultBatching is a Gate's batching unless WithBatching says otherwise.
var DefaultBatching = Batching{MaxBatch: 128, InFlight: 4}

// batchTimeout bounds one script call: the grabs of a batch belong to many callers, so no one
// caller's context may end it.
const batchTimeout = 5 * time.Second

// call is one grab on its way through a lane.
type call struct {
	// gone is the caller's context's Done: a call whose caller has gone before its batch leaves
	// is not sent (nothing is taken for nobody); once sent it runs to its outcome.
	gone   <-chan struct{}
	req    sale.GrabRequest
	token  string
	parent string // the traceparent for its stream entry
	res    sale.Grab
	err    error
	done   chan struct{}
}

// lane queues the grabs of one shard of an activity made on one revision of it: a batch leaves
// with the activity as its grabs' callers read it, so the callers that read a revision the gate
// holds never wait behind, or fail with, those still on an older one.
type lane struct {
	mu     sync.Mutex
	queue  []*call
	flying int // calls on their way, each with a goroutine that flushes
}

// laneKey names a lane: a shard (the activity's id when its stock is not sharded) and a
// revision.
type laneKey struct {
	shard    string
	revision int64
}

// lane returns the lane of shard at a's revision. Making a lane drops the shard's lanes of older
// revisions: their callers finish on the lanes they hold, and a late one makes its own again.
func (g *Gate) lane(a sale.Activity, shard string) *lane {
	key := laneKey{shard, a.Revision}
	if l, ok := g.lanes.Load(key); ok {
		return l.(*lane)
	}
	l, loaded := g.lanes.LoadOrStore(key, &lane{})
	if !loaded {
		g.lanes.Range(func(k, _ any) bool {
			if k := k.(laneKey); k.shard == shard && k.revision < a.Revision {
				g.lanes.Delete(k)
			}
			return true
		})
	}
	return l.(*lane)
}

// dropLanes forgets the lanes of every shard of a, whatever their revision.
func (g *Gate) dropLanes(a sale.Activity) {
	shards := make(map[string]bool, shardsOf(a))
	for i := range shardsOf(a) {
		shards[ShardID(a.ID, i)] = true
	}
	g.lanes.Range(func(k, _ any) bool {
		if shards[k.(laneKey).shard] {
			g.lanes.Delete(k)
		}
		return true
	})
}

// coalesce runs r through its activity's lane and returns its answer. When fewer than InFlight
// calls are on their way the caller sends a batch itself (its grab with whatever queued), and
// keeps sending while grabs queue behind it, until its own is answered; then a goroutine takes
// over. Otherwise it waits for a sender to take its grab. A caller whose context ends stops
// waiting and gets ErrBusy; its grab may still be taken (a retry with its idempotency key
// learns what became of it).
func (g *Gate) coalesce(ctx context.Context, a sale.Activity, shard string, r sale.GrabRequest, parent string) (sale.Grab, error) {
	c := &call{gone: ctx.Done(), req: r, token: sale.NewGrabToken(r.Now), parent: parent, done: make(chan struct{})}
	l := g.lane(a, shard)
	l.mu.Lock()
	l.queue = append(l.queue, c)
	send := l.flying < g.batching.InFlight
	if send {
		l.flying++
	}
	l.mu.Unlock()
	if send {
		g.send(l, a, shard, c)
	}
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		// %v, not %w: breaker.Failed must not take this busy grab for a caller that gave up.
		return sale.Grab{}, fmt.Errorf("%w: grab on redis: %v", sale.ErrBusy, ctx.Err())
	}
}

// send flushes l's queue batch by batch while it is not empty. own is the caller's grab: once
// it is answered and more remain, a goroutine carries on, so that no caller waits for others.
func (g *Gate) send(l *lane, a sale.Activity, shard string, own *call) {
	for {
		l.mu.Lock()
		if g.batching.Linger > 0 && len(l.queue) < g.batching.MaxBatch {
			l.mu.Unlock()
			time.Sleep(g.batching.Linger)
			l.mu.Lock()
		}
		n := min(len(l.queue), g.batching.MaxBatch)
		if n == 0 {
			l.flying--
			l.mu.Unlock()
			return
		}
		batch := make([]*call, 0, n)
		for _, c := range l.queue[:n] {
			if abandoned(c) {
				// Its caller was answered BUSY already (a Redis slow or failing over while the
				// queue grew): sending it would take a unit nobody learns of, and keep the
				// callers still waiting behind a backlog of the ones gone.
				c.err = fmt.Errorf("%w: grab on redis: its caller is gone", sale.ErrBusy)
				close(c.done)
				continue
			}
			batch = append(batch, c)
		}
		rest := copy(l.queue, l.queue[n:])
		clear(l.queue[rest:])
		l.queue = l.queue[:rest]
		l.mu.Unlock()

		if len(batch) > 0 {
			g.flush(a, shard, batch)
		}
		if own != nil && isDone(own) {
			l.mu.Lock()
			more := len(l.queue) > 0
			if !more {
				l.flying--
			}
			l.mu.Unlock()
			if more {
				go g.send(l, a, shard, nil)
			}
			return
		}
	}
}

// abandoned reports whether c's caller has gone.
func abandoned(c *call) bool {
	select {
	case <-c.gone:
		return true
	default:
		return false
	}
}

func isDone(c *call) bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// flush sends one batch of grabs of a's shard (a.ID itself when the stock is not sharded) in
// one script call and answers each of its grabs.
func (g *Gate) flush(a sale.Activity, shard string, batch []*call) {
	k := keysOf(shard)
	keys := make([]string, 10, 10+len(batch))
	keys[0], keys[1], keys[2], keys[3], keys[4], keys[5], keys[6], keys[7], keys[8], keys[9] = k.stock, k.shares, k.held, k.answers,
		k.grabs, k.stream, k.pending, k.away, k.revision, k.reserved
	sharded := "0"
	if shardsOf(a) > 1 {
		sharded = "1"
		units, known, lapsed := g.seen.others(a, shard, time.Now())
		if known && lapsed {
			g.lookAgain(a)
			units, known, _ = g.seen.others(a, shard, time.Now())
		}
		if known {
			// As many grabs out of units here may reserve as the others hold; the rest are sold
			// out, with no reservation and no fall-through ("2": every other shard empty).
			sharded = strconv.FormatInt(2+units, 10)
		}
	}
	args := make([]any, 0, 11+10*len(batch))
	args = append(args, a.StartAt.UnixMilli(), a.EndAt.UnixMilli(), a.PerUserLimit, string(a.Kind), a.PriceCents, a.ID,
		flag(a.PassAtTheGate()), sharded, max(a.Revision, 1), flag(a.Admission == sale.AdmitReservation), a.WaveInterval.Milliseconds())
	for _, c := range batch {
		idx := 0
		if c.req.Pass != "" {
			keys = append(keys, passKey(shard, c.req.Pass))
			idx = len(keys)
		}
		rate, perSecond, burst := 0, int64(0), int64(0)
		if u := c.req.UserRate; !u.Off() {
			keys = append(keys, rateKey(shard, c.req.UserID))
			rate, perSecond, burst = len(keys), u.PerSecond, max(u.Burst, 1)
		}
		args = append(args, c.token, c.req.UserID, c.req.IdempotencyKey, c.req.Now.UnixMilli(), idx, c.req.Pass, c.parent,
			rate, perSecond, burst)
	}
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	res, err := g.repl.runScript(ctx, g.rdb, g.grabs, grabScript, keys, args...).Slice()
	cancel()
	if err == nil && len(res) != 3*len(batch) {
		err = fmt.Errorf("script answered %d values for %d grabs", len(res), len(batch))
	}
	for i, c := range batch {
		if err != nil {
			c.err = sale.Busy(err, "grab on redis")
		} else {
			code, _ := res[3*i].(int64)
			token, _ := res[3*i+1].(string)
			rec, _ := res[3*i+2].(string)
			c.res, c.err = grabOfReply(a, c.req.Pass, code, token, rec)
		}
		close(c.done)
	}
}

// errReserved says a grab reserved its user's unit on its home shard and must look for the unit
// on the others.
var errReserved = errors.New("reserved: the home shard is out of units")

// errInProgress says the first grab with the same idempotency key is still looking for its unit
// on the other shards: its answer is not known yet.
var errInProgress = fmt.Errorf("%w: the grab is still looking for a unit", sale.ErrInProgress)

// grabOfReply turns grab.lua's reply to one grab (a return code, the token and the record) into
// the gate's Grab or its error.
func grabOfReply(a sale.Activity, pass string, code int64, token, rec string) (sale.Grab, error) {
	switch code {
	case 0, 1:
		return parseRecord(a.ID, token, rec)
	case 2:
		return sale.Grab{Token: token}, errReserved
	case 3:
		return sale.Grab{}, errInProgress
	case -1:
		return sale.Grab{}, fmt.Errorf("activity %s: %w", a.ID, sale.ErrUnloaded)
	case -2:
		return sale.Grab{}, sale.ErrNotStarted
	case -3:
		return sale.Grab{}, sale.ErrEnded
	case -4:
		return sale.Grab{}, sale.ErrAlreadyBought
	case -5:
		return sale.Grab{}, sale.ErrSoldOut
	case -7:
		ms, err := strconv.ParseInt(token, 10, 64)
		if err != nil || ms < 0 {
			return sale.Grab{}, fmt.Errorf("grab on redis: script answered a wait of %q", token)
		}
		return sale.Grab{}, sale.Throttled{RetryAfter: time.Duration(ms) * time.Millisecond}
	case -10:
		return sale.Grab{}, fmt.Errorf("activity %s, revision %d: %w", a.ID, a.Revision, sale.ErrStale)
	case -11:
		return sale.Grab{}, fmt.Errorf("activity %s: %w", a.ID, sale.ErrNotReserved)
	case -12:
		opens, err1 := strconv.ParseInt(token, 10, 64)
		wave, err2 := strconv.ParseInt(rec, 10, 64)
		if err1 != nil || err2 != nil {
			return sale.Grab{}, fmt.Errorf("grab on redis: script answered a wave %q opening at %q", rec, token)
		}
		if wave == 0 {
			return sale.Grab{}, sale.WaveNotOpen{}
		}
		return sale.Grab{}, sale.WaveNotOpen{Wave: wave, OpensAt: time.UnixMilli(opens).UTC()}
	case -6:
		if pass == "" {
			return sale.Grab{}, sale.ErrChallengeRequired
		}
		return sale.Grab{}, fmt.Errorf("%w: the path token is unknown, spent, expired or someone else's", sale.ErrChallengeRequired)
	}
	return sale.Grab{}, fmt.Errorf("grab on redis: script answered %s", strconv.FormatInt(code, 10))
}
