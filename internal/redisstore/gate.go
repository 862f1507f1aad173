// Package redisstore is the stock gate of the distributed mode, on Redis or Redis Cluster. One Lua
// script (grab.lua) checks the sale window, the idempotency key, the per-user limit and the stock,
// takes the unit, records the buyer and appends the grab to the activity's stream, atomically on
// one hash slot: every key of an activity carries the hash tag {act:ID}. Scripts run with EVALSHA
// and fall back to EVAL when a node does not know them (a new node, a failover).
package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/singleflight"

	"seckill/internal/sale"
	"seckill/internal/tracing"
)

var (
	//go:embed grab.lua
	grabLua    string
	grabScript = redis.NewScript(grabLua)

	//go:embed release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)
)

var _ sale.Gate = (*Gate)(nil)

// Gate is a sale.Gate on Redis.
type Gate struct {
	rdb redis.UniversalClient
	// grabs carries the grab scripts: concurrent grabs share a pipeline, so a crowd costs
	// Redis and this process one read and one write per batch instead of per grab.
	grabs    redis.Scripter
	batching Batching
	lanes    sync.Map // laneKey -> *lane, the grabs waiting to leave together
	repl     Replication

	// seen remembers what this node last found of the shards of sharded stocks: how many units
	// each held, looked at again once emptyFor old. A crowd falling through skips the shards
	// found empty, and only as many grabs reserve as the others are known to hold.
	seen seenUnits
	// looks runs one lookAgain per activity at a time.
	looks singleflight.Group
	// topo tells a failover's errors apart, for the steps of a fall-through to be sent again
	// through one; nil (one server) classifies nothing.
	topo *Topology
}

// emptyFor is how long what a node found of a shard's units stands before it is looked at again:
// a shard found out of units is skipped by the grabs falling through for so long. A unit given
// back there by another node meanwhile waits this long to be found (this node's own releases
// count at once), longer only while Redis cannot answer the look.
const emptyFor = 250 * time.Millisecond

// New returns a gate on rdb that coalesces grabs by DefaultBatching. It keeps no activities:
// each call names its own (see sale.Inventory).
func New(rdb redis.UniversalClient) *Gate {
	g := &Gate{rdb: rdb, grabs: rdb, batching: DefaultBatching, topo: NewTopology(rdb)}
	if ap, err := rdb.AutoPipeline(); err == nil {
		g.grabs = ap
	}
	return g
}

// WithReplication makes every write the gate acknowledges wait for r's replicas.
func (g *Gate) WithReplication(r Replication) *Gate {
	g.repl = r
	return g
}

// WithBatching sets how the gate coalesces grabs (zero fields keep their defaults; MaxBatch 1
// sends every grab in a script call of its own).
func (g *Gate) WithBatching(b Batching) *Gate {
	if b.MaxBatch <= 0 {
		b.MaxBatch = DefaultBatching.MaxBatch
	}
	if b.InFlight <= 0 {
		b.InFlight = DefaultBatching.InFlight
	}
	g.batching = b
	return g
}

// Grab implements sale.Gate. Traced, it is a "gate grab" span, and each try on Redis a
// "publish grab" span whose traceparent goes into the grab's stream entry: the worker that reads
// the entry continues the click's trace from there.
func (g *Gate) Grab(ctx context.Context, a sale.Activity, r sale.GrabRequest) (gr sale.Grab, err error) {
	// Attributes only for a span that records: untraced, the hot path builds none of them.
	ctx, span := tracer.Start(ctx, "gate grab", trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(attribute.String("db.system.name", "redis"), attribute.String("seckill.activity", a.ID))
	}
	defer func() { endSpan(span, err) }()
	n := shardsOf(a)
	home := homeShard(r.UserID, n)
	shard := ShardID(a.ID, home)
	// A repeat of a key whose first grab is still looking on the other shards waits a little for
	// its answer (milliseconds, as a rule), then says busy: a retry will get it. A first grab that
	// gave up (Redis failed it mid-way) is resumed by the repeat once it is surely over (resume).
	// The wait ends before the caller's deadline: a repeat answered busy in time is the gate's
	// answer (sale.ErrInProgress), one abandoned at the deadline would count as Redis failing.
	for wait := time.Millisecond; ; wait *= 2 {
		pctx, publish := tracer.Start(ctx, "publish grab", trace.WithSpanKind(trace.SpanKindProducer))
		if publish.IsRecording() {
			publish.SetAttributes(attribute.String("messaging.system", "redis"), attribute.String("messaging.destination.name", keysOf(shard).stream))
		}
		parent := tracing.Parent(pctx)
		if g.batching.MaxBatch <= 1 {
			c := &call{req: r, token: sale.NewGrabToken(r.Now), parent: parent, done: make(chan struct{})}
			g.flush(a, shard, []*call{c})
			gr, err = c.res, c.err
		} else {
			gr, err = g.coalesce(ctx, a, shard, r, parent)
		}
		if errors.Is(err, errReserved) {
			token := gr.Token
			gr, err = answerBy(ctx, a, token, func() (sale.Grab, error) { return g.fallThrough(a, home, r, token, parent) })
		}
		endSpan(publish, err)
		if errors.Is(err, errInProgress) && wait < 2*time.Second && roomFor(ctx, wait) {
			select {
			case <-ctx.Done():
				return sale.Grab{}, err
			case <-time.After(wait):
			}
			continue
		}
		if errors.Is(err, errInProgress) && r.IdempotencyKey != "" {
			return g.resume(ctx, a, home, r, parent)
		}
		return gr, err
	}
}

// answerBy runs look, a fall-through on a context of its own (batchTimeout, whose steps may be
// sent again through a failover), and answers before ctx's deadline: should look still be
// looking then, the caller is told that its grab is in progress (sale.ErrInProgress: busy for the
// client, the gate's answer for the breaker), and look goes on to settle the grab, whose repeat
// gets its answer. Left to run past the deadline, the call would be abandoned by its guard and
// counted as Redis failing, for a failover's sake: it opened breakers in the nemesis.
func answerBy(ctx context.Context, a sale.Activity, token string, look func() (sale.Grab, error)) (sale.Grab, error) {
	dl, ok := ctx.Deadline()
	if !ok {
		return look()
	}
	type result struct {
		gr  sale.Grab
		err error
	}
	done := make(chan result, 1)
	go func() {
		gr, err := look()
		done <- result{gr, err}
	}()
	timer := time.NewTimer(time.Until(dl) - answerMargin)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.gr, r.err
	case <-timer.C:
	case <-ctx.Done():
	}
	return sale.Grab{}, fmt.Errorf("%w: grab %s still looking on the shards of %s", sale.ErrInProgress, token, a.ID)
}

// roomFor reports whether ctx leaves time to wait d and still answer before its deadline.
func roomFor(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return !ok || time.Until(dl) > d+answerMargin
}

// answerMargin is the time a call keeps, of its deadline, to answer.
const answerMargin = 100 * time.Millisecond

// tracer makes the gate's spans; a no-op until the process installs a tracer provider.
var tracer = tracing.Tracer("seckill/internal/redisstore")

// endSpan ends span, marked failed when err is a fault of the gate's (not a buyer's refusal:
// sold out, not started).
func endSpan(span trace.Span, err error) {
	if err != nil && !sale.IsVerdict(err) {
		span.SetStatus(codes.Error, err.Error())
	} else if err != nil {
		span.SetAttributes(attribute.String("seckill.verdict", err.Error()))
	}
	span.End()
}

// Release implements sale.Gate. A grab of a sharded stock holds its unit on its home shard, or
// on another one it took it from (then its home shard's "away" entry says which); the unit goes
// back where it was taken, the hold where the user's holdings are.
func (g *Gate) Release(ctx context.Context, a sale.Activity, gr sale.Grab) error {
	home := homeShard(gr.UserID, shardsOf(a))
	k := keysOf(ShardID(a.ID, home))
	n, err := g.release(ctx, a, k, gr, "")
	if n == 1 {
		g.seen.gaveBack(ShardID(a.ID, home))
	}
	if err != nil || n == 1 || shardsOf(a) == 1 {
		return err
	}
	v, err := g.rdb.HGet(ctx, k.away, gr.Token).Result()
	if errors.Is(err, redis.Nil) {
		return nil // released before, or unknown to this cache
	}
	if err != nil {
		return sale.Busy(err, "release on redis")
	}
	j, err := strconv.ParseInt(v[:strings.IndexByte(v+"\n", '\n')], 10, 64)
	if err != nil || j < 0 || j >= shardsOf(a) {
		return fmt.Errorf("release on redis: grab %s is away on shard %q", gr.Token, v)
	}
	if _, err := g.release(ctx, a, keysOf(ShardID(a.ID, j)), gr, "unit"); err != nil {
		return err
	}
	g.seen.gaveBack(ShardID(a.ID, j))
	if err := g.home(ctx, a, home, "release", gr.Token, gr.UserID, gr.IdempotencyKey, 0, ""); err != nil {
		return sale.Busy(err, "release on redis")
	}
	return nil
}

// release runs release.lua on the shard of keys k; it answers 1 if it gave the unit back.
func (g *Gate) release(ctx context.Context, a sale.Activity, k keys, gr sale.Grab, mode string) (int64, error) {
	n, err := g.repl.runScript(ctx, g.rdb, g.rdb, releaseScript, []string{k.stock, k.shares, k.held, k.grabs},
		gr.Token, gr.UserID, gr.Share, gr.AmountCents, string(a.Kind), mode).Int64()
	switch {
	case err != nil:
		return 0, sale.Busy(err, "release on redis")
	case n == -1:
		return 0, fmt.Errorf("release on redis: activity %s: %w", a.ID, sale.ErrUnloaded)
	case n < 0:
		return 0, fmt.Errorf("release on redis: script answered %d", n)
	}
	return n, nil
}

// Drop implements sale.Gate: every key of every shard of the activity, its dead-letter stream
// included (the dead letters are in the database too). Passes expire by themselves.
func (g *Gate) Drop(ctx context.Context, a sale.Activity) error {
	for i := range shardsOf(a) {
		id := ShardID(a.ID, i)
		k := keysOf(id)
		// One slot per shard: one DEL each, cluster or not.
		if err := g.rdb.Del(ctx, k.stock, k.shares, k.held, k.answers, k.grabs, k.stream, k.pending, k.away, k.shards,
			k.revision, k.reserved, DeadKey(id)).Err(); err != nil {
			return sale.Busy(err, "drop activity %s from redis", a.ID)
		}
		g.seen.forget(id)
	}
	g.dropLanes(a)
	return nil
}

// Remaining implements sale.Gate: the units left on every shard.
func (g *Gate) Remaining(ctx context.Context, a sale.Activity) (int64, error) {
	n, err := g.rdb.Get(ctx, keysOf(a.ID).stock).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("activity %s: %w", a.ID, sale.ErrUnloaded)
	}
	if err != nil {
		return 0, sale.Busy(err, "redis")
	}
	for i := int64(1); i < shardsOf(a); i++ {
		m, err := g.rdb.Get(ctx, keysOf(ShardID(a.ID, i)).stock).Int64()
		if errors.Is(err, redis.Nil) {
			return 0, fmt.Errorf("activity %s, shard %d: %w", a.ID, i, sale.ErrUnloaded)
		}
		if err != nil {
			return 0, sale.Busy(err, "redis")
		}
		n += m
	}
	return n, nil
}
