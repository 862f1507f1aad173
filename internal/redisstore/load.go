package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/sale"
)

// Loading and repair: how an activity's state gets into Redis, shard by shard. prepare splits
// the state over the shards and shardState.write writes one shard's keys. Load replaces every
// shard; Warm writes only the shards Redis does not hold, each with a compare-and-set on its
// stock key, so that it never overwrites units on sale; Repair makes the gate hold what its
// caller reads, provided nothing moved in the gate meanwhile (a sharded stock: its count, on
// shard 0).

// Load implements sale.Gate: it replaces what Redis holds for a, one MULTI/EXEC per shard. The
// stream is left alone: its entries are grabs still on their way to orders.
func (g *Gate) Load(ctx context.Context, a sale.Activity, st sale.GateState) error {
	parts, err := g.prepare(ctx, a, st)
	if err != nil {
		return err
	}
	for i := int64(len(parts)) - 1; i >= 0; i-- { // shard 0 last: its stock means "loaded"
		k := keysOf(ShardID(a.ID, i))
		if _, err := g.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error { return parts[i].write(ctx, p, k) }); err != nil {
			return sale.Busy(err, "load activity %s into redis", a.ID)
		}
	}
	return nil
}

// Warm implements sale.Gate. Each shard is written only if it is absent, atomically with that
// check (WATCH on its stock key), so two nodes starting together, or a node rebuilding an
// activity another is selling, never overwrite units on sale. Shard 0 is written last, and its
// stock means "loaded": a node that finds other shards but not shard 0 waits a moment for the
// loader that is writing them. A shard missing from a loaded activity (its master failed over
// to an empty replica) gets back its users' holdings, records and answers and no units: the
// units it had are unknown, and a reconcile at rest gives the difference back to shard 0.
func (g *Gate) Warm(ctx context.Context, a sale.Activity, st sale.GateState) (bool, error) {
	parts, err := g.prepare(ctx, a, st)
	if err != nil {
		return false, err
	}
	n := int64(len(parts))
	present, err := g.present(ctx, a, n)
	if err != nil {
		return false, err
	}
	if !present[0] && slices.Contains(present, true) {
		// Another node may be loading it: its shard 0 comes last. Give it a moment.
		for wait := time.Now().Add(warmWait); !present[0] && time.Now().Before(wait); {
			time.Sleep(20 * time.Millisecond)
			if present, err = g.present(ctx, a, n); err != nil {
				return false, err
			}
		}
	}
	whole := !slices.Contains(present, true) // nothing of it there: the whole split
	loaded := false
	for i := n - 1; i >= 0; i-- {
		if present[i] {
			continue
		}
		part := parts[i]
		if !whole {
			part.remaining = 0 // a lost shard: its units come back through a reconcile
		}
		k := keysOf(ShardID(a.ID, i))
		err := g.rdb.Watch(ctx, func(tx *redis.Tx) error {
			if n, err := tx.Exists(ctx, k.stock).Result(); err != nil {
				return err
			} else if n == 1 {
				return errLoaded
			}
			_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error { return part.write(ctx, p, k) })
			return err
		}, k.stock)
		switch {
		case errors.Is(err, errLoaded) || errors.Is(err, redis.TxFailedErr):
			// another node wrote this shard first
		case err != nil:
			return false, sale.Busy(err, "load activity %s into redis", a.ID)
		default:
			loaded = true
		}
	}
	return loaded, nil
}

// warmWait is how long Warm waits for another node to finish loading an activity.
const warmWait = time.Second

// present reports which of a's n shards Redis holds (their stock key exists).
func (g *Gate) present(ctx context.Context, a sale.Activity, n int64) ([]bool, error) {
	out := make([]bool, n)
	for i := range n {
		ok, err := g.rdb.Exists(ctx, keysOf(ShardID(a.ID, i)).stock).Result()
		if err != nil {
			return nil, sale.Busy(err, "load activity %s into redis", a.ID)
		}
		out[i] = ok == 1
	}
	return out, nil
}

var errLoaded = errors.New("loaded already")

// prepare makes sure every shard's stream has its consumer group and splits st over a's shards:
// each gets its part of what is left, and the holdings, records and answers of the users whose
// home it is.
func (g *Gate) prepare(ctx context.Context, a sale.Activity, st sale.GateState) ([]shardState, error) {
	n := shardsOf(a)
	for i := range n {
		if err := ensureGroup(ctx, g.rdb, keysOf(ShardID(a.ID, i)).stream); err != nil {
			return nil, sale.Busy(err, "create the consumer group of %s", a.ID)
		}
	}
	remaining := st.Remaining(a)
	if remaining < 0 {
		return nil, fmt.Errorf("load activity %s: %d units held of a stock of %d", a.ID, len(st.Held), a.Stock)
	}
	parts := make([]shardState, n)
	for i := range parts {
		parts[i].remaining = remaining / n
		if int64(i) < remaining%n {
			parts[i].remaining++
		}
		parts[i].held = map[string]int64{}
		parts[i].revision = max(a.Revision, 1)
	}
	parts[0].shares, parts[0].shards = st.Shares, n
	for _, h := range st.Held {
		p := &parts[homeShard(h.UserID, n)]
		p.held[h.UserID]++
		p.grabs = append(p.grabs, h)
	}
	for _, h := range st.Keyed {
		p := &parts[homeShard(h.UserID, n)]
		p.keyed = append(p.keyed, h)
	}
	return parts, nil
}

// Repair implements sale.Gate. Every key of shard 0 is watched while read runs: a grab, a
// release or a load there meanwhile makes the repair fail with ErrChanged, and so does a change
// of the other shards' counts. A stock on one slot is then replaced whole in one MULTI/EXEC; a
// sharded stock has shard 0's count moved by the difference.
func (g *Gate) Repair(ctx context.Context, a sale.Activity, read func(ctx context.Context, remaining int64) (sale.GateState, bool, error)) (bool, error) {
	n := shardsOf(a)
	k := keysOf(a.ID)
	counts := func(ctx context.Context, first redis.Cmdable) ([]int64, error) {
		out := make([]int64, n)
		for i := range n {
			c := g.rdb.Get
			if i == 0 {
				c = first.Get
			}
			v, err := c(ctx, keysOf(ShardID(a.ID, i)).stock).Int64()
			if errors.Is(err, redis.Nil) {
				return nil, fmt.Errorf("activity %s, shard %d: %w", a.ID, i, sale.ErrUnloaded)
			}
			if err != nil {
				return nil, sale.Busy(err, "redis")
			}
			out[i] = v
		}
		return out, nil
	}
	repaired := false
	err := g.rdb.Watch(ctx, func(tx *redis.Tx) error {
		before, err := counts(ctx, tx)
		if err != nil {
			return err
		}
		switch held, err := tx.Get(ctx, k.revision).Int64(); {
		case errors.Is(err, redis.Nil):
		case err != nil:
			return sale.Busy(err, "redis")
		case held > a.Revision:
			return sale.ErrChanged // the caller read the activity before a change: read it again
		}
		var total int64
		for _, c := range before {
			total += c
		}
		st, repair, err := read(ctx, total)
		if err != nil || !repair {
			return err
		}
		if n > 1 {
			after, err := counts(ctx, tx)
			if err != nil {
				return err
			}
			if !slices.Equal(before, after) {
				return sale.ErrChanged
			}
		}
		parts, err := g.prepare(ctx, a, st)
		if err != nil {
			return err
		}
		// A sharded stock is corrected on shard 0, the one in this transaction's slot: units
		// missing are added there, units too many taken from there as far as it has them, and
		// the rest from the other shards once it has committed (each take atomic on its shard,
		// never below zero: a shard driven negative would hide the units given back to it).
		var elsewhere int64
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			if n == 1 {
				return parts[0].write(ctx, p, k)
			}
			var want int64
			for _, part := range parts {
				want += part.remaining
			}
			delta := want - total
			if delta < 0 && before[0]+delta < 0 {
				elsewhere, delta = -(before[0] + delta), -before[0]
			}
			p.IncrBy(ctx, k.stock, delta)
			p.Set(ctx, k.revision, max(a.Revision, 1), 0)
			return nil
		})
		if err != nil {
			return err
		}
		repaired = true
		for i := int64(1); i < n; i++ { // the other shards catch up to the revision repaired
			if _, err := reviseScript.Run(ctx, g.rdb, keysOf(ShardID(a.ID, i)).revisionKeys(), max(a.Revision, 1), 0, 1).Int64(); err != nil {
				return sale.Busy(err, "repair shard %d of %s", i, a.ID)
			}
		}
		for i := int64(1); i < n && elsewhere > 0; i++ {
			took, err := takeUpTo.Run(ctx, g.rdb, []string{keysOf(ShardID(a.ID, i)).stock}, elsewhere).Int64()
			if err != nil {
				return sale.Busy(err, "repair shard %d of %s", i, a.ID)
			}
			elsewhere -= took
		}
		return nil
	}, k.stock, k.shares, k.held, k.answers, k.grabs, k.pending, k.away, k.revision)
	switch {
	case errors.Is(err, redis.TxFailedErr), errors.Is(err, sale.ErrChanged):
		return false, fmt.Errorf("repair activity %s: %w", a.ID, sale.ErrChanged)
	case err != nil && !errors.Is(err, sale.ErrBusy) && !sale.IsVerdict(err) && !errors.Is(err, sale.ErrUnloaded):
		return false, sale.Busy(err, "repair activity %s", a.ID)
	}
	return repaired, err
}

// takeUpTo takes up to ARGV[1] units from the stock KEYS[1], never below zero, and returns how
// many it took.
var takeUpTo = redis.NewScript(`
local v = tonumber(redis.call('GET', KEYS[1]) or '0')
local t = math.min(v, tonumber(ARGV[1]))
if t <= 0 then return 0 end
redis.call('DECRBY', KEYS[1], t)
return t
`)

// shardState is what one shard of an activity holds after a load.
type shardState struct {
	shards    int64 // on shard 0: how many there are (what the queue reads to find their streams)
	revision  int64 // the revision of the activity it holds
	remaining int64
	shares    []sale.Share
	held      map[string]int64
	grabs     []sale.Grab
	keyed     []sale.Grab
}

// write queues the commands that replace the shard's keys k with s. The stream is left alone:
// its entries are grabs still on their way to orders.
func (s shardState) write(ctx context.Context, p redis.Pipeliner, k keys) error {
	p.Del(ctx, k.stock, k.shares, k.held, k.answers, k.grabs, k.pending, k.away)
	if len(s.shares) > 0 {
		// Pushed from the last to the first, so RPOP hands them out in index order.
		vals := make([]any, 0, len(s.shares))
		for i := len(s.shares) - 1; i >= 0; i-- {
			vals = append(vals, strconv.FormatInt(s.shares[i].Index, 10)+":"+strconv.FormatInt(s.shares[i].AmountCents, 10))
		}
		p.RPush(ctx, k.shares, vals...)
	}
	for user, n := range s.held {
		p.HSet(ctx, k.held, user, n)
	}
	for _, h := range s.grabs {
		p.HSet(ctx, k.grabs, h.Token, record(h))
	}
	for _, h := range s.keyed {
		p.HSet(ctx, k.answers, h.UserID+"\x00"+h.IdempotencyKey, h.Token+"\n"+record(h))
	}
	if s.shards > 0 {
		p.Set(ctx, k.shards, s.shards, 0)
	}
	p.Set(ctx, k.revision, s.revision, 0)
	p.Set(ctx, k.stock, s.remaining, 0) // last: its presence means "loaded"
	return nil
}
