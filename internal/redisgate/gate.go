// Package redisgate is the stock gate of the distributed mode, on Redis or Redis Cluster. One Lua
// script (grab.lua) checks the sale window, the idempotency key, the per-user limit and the stock,
// takes the unit, records the buyer and appends the grab to the activity's stream, atomically on
// one hash slot: every key of an activity carries the hash tag {act:ID}. Scripts run with EVALSHA
// and fall back to EVAL when a node does not know them (a new node, a failover).
package redisgate

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/sale"
)

var (
	//go:embed grab.lua
	grabLua    string
	grabScript = redis.NewScript(grabLua)

	//go:embed release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)

	//go:embed take.lua
	takeLua    string
	takeScript = redis.NewScript(takeLua)

	//go:embed home.lua
	homeLua    string
	homeScript = redis.NewScript(homeLua)

	//go:embed spend.lua
	spendLua    string
	spendScript = redis.NewScript(spendLua)
)

var _ sale.Gate = (*Gate)(nil)

// Gate is a sale.Gate on Redis.
type Gate struct {
	rdb redis.UniversalClient
	// grabs carries the grab scripts: concurrent grabs share a pipeline, so a crowd costs
	// Redis and this process one read and one write per batch instead of per grab.
	grabs redis.Scripter
	// activity reads an activity the gate has not seen yet (from the database): another node
	// may have created it.
	activity func(ctx context.Context, id string) (sale.Activity, error)

	mu   sync.RWMutex
	acts map[string]sale.Activity // activities never change once created

	batching Batching
	lanes    sync.Map // activity id -> *lane, the grabs waiting to leave together
	repl     Replication

	// empty remembers, per shard of a sharded stock, until when (Unix nanoseconds) it was found
	// out of units: a crowd falling through does not ask it again for emptyFor.
	empty sync.Map // shard id -> int64
}

// emptyFor is how long a shard found out of units is skipped by the grabs falling through. A
// unit given back there meanwhile waits at most this long to be found (this node's own
// releases clear the mark at once).
const emptyFor = 250 * time.Millisecond

// New returns a gate on rdb that coalesces grabs by DefaultBatching. activity is how it learns
// of activities created by other nodes.
func New(rdb redis.UniversalClient, activity func(ctx context.Context, id string) (sale.Activity, error)) *Gate {
	g := &Gate{rdb: rdb, grabs: rdb, activity: activity, acts: map[string]sale.Activity{}, batching: DefaultBatching}
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

// Sharded stock. An item so hot that one Redis core cannot take its crowd splits its stock into
// StockShards counters, each with the keys of an activity of its own in a slot of its own:
// shard 0 is the activity's own keys, shard i the keys of the id "ID/i" (no activity id has a
// '/'). Every user has a home shard, which holds their holdings and idempotent answers, and where
// their grabs go first; when the home shard is out of units, grab.lua reserves the user's unit
// there, take.lua takes a unit from the next shard that has one (its grab record and its stream
// entry live on that shard), and home.lua settles the reservation: won, or nothing anywhere
// (sold out). The per-user limit is the home shard's count, reservations included, so a user
// cannot buy twice by falling through; a grab falls through every other shard before it is
// told sold out, so the last units are found.

// homeShard is the shard of user's holdings and answers.
func homeShard(user string, shards int64) int64 {
	if shards <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(user))
	return int64(h.Sum32() % uint32(shards))
}

func (g *Gate) lookup(ctx context.Context, id string) (sale.Activity, error) {
	g.mu.RLock()
	a, ok := g.acts[id]
	g.mu.RUnlock()
	if ok {
		return a, nil
	}
	a, err := g.activity(ctx, id)
	if err != nil {
		return sale.Activity{}, err
	}
	g.mu.Lock()
	g.acts[id] = a
	g.mu.Unlock()
	return a, nil
}

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
			return fmt.Errorf("%w: load activity %s into redis: %w", sale.ErrBusy, a.ID, err)
		}
	}
	g.remember(a)
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
			return false, fmt.Errorf("%w: load activity %s into redis: %w", sale.ErrBusy, a.ID, err)
		default:
			loaded = true
		}
	}
	g.remember(a)
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
			return nil, fmt.Errorf("%w: load activity %s into redis: %w", sale.ErrBusy, a.ID, err)
		}
		out[i] = ok == 1
	}
	return out, nil
}

var errLoaded = errors.New("loaded already")

// remember notes a as known to this gate.
func (g *Gate) remember(a sale.Activity) {
	g.mu.Lock()
	g.acts[a.ID] = a
	g.mu.Unlock()
}

// prepare makes sure every shard's stream has its consumer group and splits st over a's shards:
// each gets its part of what is left, and the holdings, records and answers of the users whose
// home it is.
func (g *Gate) prepare(ctx context.Context, a sale.Activity, st sale.GateState) ([]shardState, error) {
	n := shardsOf(a)
	for i := range n {
		if err := ensureGroup(ctx, g.rdb, keysOf(ShardID(a.ID, i)).stream); err != nil {
			return nil, fmt.Errorf("%w: create the consumer group of %s: %w", sale.ErrBusy, a.ID, err)
		}
	}
	remaining := a.Stock - int64(len(st.Held))
	if a.Kind == sale.KindRedPacket {
		remaining = int64(len(st.Shares))
	}
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
				return nil, fmt.Errorf("%w: redis: %w", sale.ErrBusy, err)
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
			return nil
		})
		if err != nil {
			return err
		}
		repaired = true
		for i := int64(1); i < n && elsewhere > 0; i++ {
			took, err := takeUpTo.Run(ctx, g.rdb, []string{keysOf(ShardID(a.ID, i)).stock}, elsewhere).Int64()
			if err != nil {
				return fmt.Errorf("%w: repair shard %d of %s: %w", sale.ErrBusy, i, a.ID, err)
			}
			elsewhere -= took
		}
		return nil
	}, k.stock, k.shares, k.held, k.answers, k.grabs, k.pending, k.away)
	switch {
	case errors.Is(err, redis.TxFailedErr), errors.Is(err, sale.ErrChanged):
		return false, fmt.Errorf("repair activity %s: %w", a.ID, sale.ErrChanged)
	case err != nil && !errors.Is(err, sale.ErrBusy) && !sale.IsAnswer(err) && !errors.Is(err, sale.ErrUnloaded):
		return false, fmt.Errorf("%w: repair activity %s: %w", sale.ErrBusy, a.ID, err)
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
	p.Set(ctx, k.stock, s.remaining, 0) // last: its presence means "loaded"
	return nil
}

// Grab implements sale.Gate.
func (g *Gate) Grab(ctx context.Context, r sale.GrabRequest) (sale.Grab, error) {
	a, err := g.lookup(ctx, r.ActivityID)
	if err != nil {
		return sale.Grab{}, err
	}
	n := shardsOf(a)
	home := homeShard(r.UserID, n)
	shard := ShardID(a.ID, home)
	// A repeat of a key whose first grab is still looking on the other shards waits a little for
	// its answer (milliseconds, as a rule), then says busy: a retry will get it.
	for wait := time.Millisecond; ; wait *= 2 {
		var gr sale.Grab
		if g.batching.MaxBatch <= 1 {
			c := &call{req: r, token: sale.NewGrabToken(r.Now), done: make(chan struct{})}
			g.flush(a, shard, []*call{c})
			gr, err = c.res, c.err
		} else {
			gr, err = g.coalesce(ctx, a, shard, r)
		}
		switch {
		case errors.Is(err, errReserved):
			return g.fallThrough(a, home, r, gr.Token)
		case errors.Is(err, errInProgress) && wait < 2*time.Second:
			select {
			case <-ctx.Done():
				return sale.Grab{}, err
			case <-time.After(wait):
			}
			continue
		}
		return gr, err
	}
}

// fallThrough looks for a unit for a grab reserved on its home shard, on each other shard in
// turn, and settles the reservation. The grab is won once a shard has given the unit (its
// stream entry is written with it); should the settling fail, the sweeper (Settle) finishes it.
// A failure before that leaves the reservation to the sweeper too, and answers ErrBusy.
func (g *Gate) fallThrough(a sale.Activity, home int64, r sale.GrabRequest, token string) (sale.Grab, error) {
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	n := shardsOf(a)
	for step := int64(1); step < n; step++ {
		j := (home + step) % n
		id := ShardID(a.ID, j)
		if until, ok := g.empty.Load(id); ok && time.Now().UnixNano() < until.(int64) {
			continue
		}
		k := keysOf(id)
		res, err := g.repl.runScript(ctx, g.rdb, g.grabs, takeScript, []string{k.stock, k.grabs, k.stream},
			token, r.UserID, r.IdempotencyKey, r.Now.UnixMilli(), a.PriceCents, a.ID).Slice()
		if err != nil || len(res) != 2 {
			return sale.Grab{}, fmt.Errorf("%w: take a unit from shard %d of %s: %v %w", sale.ErrBusy, j, a.ID, res, err)
		}
		code, _ := res[0].(int64)
		rec, _ := res[1].(string)
		switch code {
		case 0, 1:
			// Won: the unit and the stream entry are written. A failure to settle leaves the
			// reservation standing, which holds the user's limit as the settled grab would, until
			// the sweeper (Settle) finds the unit and settles it.
			_ = g.home(ctx, a, home, "took", token, r.UserID, r.IdempotencyKey, j, rec)
			return parseRecord(a.ID, token, rec)
		case -5, -1: // nothing here (or not loaded: nothing to sell there either)
			g.empty.Store(id, time.Now().Add(emptyFor).UnixNano())
			continue
		default:
			return sale.Grab{}, fmt.Errorf("take a unit from shard %d of %s: script answered %v", j, a.ID, res)
		}
	}
	if err := g.home(ctx, a, home, "none", token, r.UserID, r.IdempotencyKey, 0, ""); err != nil {
		return sale.Grab{}, fmt.Errorf("%w: give back a reservation on %s: %w", sale.ErrBusy, a.ID, err)
	}
	return sale.Grab{}, sale.ErrSoldOut
}

// home runs home.lua's op on shard home of a, trying again a few times when Redis fails it
// (each op happens once however often it runs): a reservation left standing holds its user's
// grabs busy until the sweeper comes.
func (g *Gate) home(ctx context.Context, a sale.Activity, home int64, op, token, user, key string, shard int64, rec string) error {
	k := keysOf(ShardID(a.ID, home))
	args := []any{op, token, user, key}
	if op == "took" {
		args = append(args, shard, rec)
	}
	var err error
	for attempt := range 3 {
		var n int64
		n, err = g.repl.runScript(ctx, g.rdb, g.grabs, homeScript, []string{k.held, k.answers, k.pending, k.away}, args...).Int64()
		if err == nil && n < 0 {
			return fmt.Errorf("home.lua %s answered %d", op, n)
		}
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 10 * time.Millisecond)
	}
	return err
}

// Settle finishes the reservations of sharded stocks that were left behind for longer than
// olderThan (their grab's process died, or Redis failed it, between reserving and settling): a
// grab whose unit a shard gave is settled won, the others give their reservation back. It
// returns how many it settled. Run it now and then on one node or many (each settling is done
// once); olderThan must be well above the longest a grab can take (batchTimeout).
func (g *Gate) Settle(ctx context.Context, olderThan time.Duration, now time.Time) (int, error) {
	g.mu.RLock()
	var acts []sale.Activity
	for _, a := range g.acts {
		if shardsOf(a) > 1 {
			acts = append(acts, a)
		}
	}
	g.mu.RUnlock()
	settled := 0
	for _, a := range acts {
		n := shardsOf(a)
		for h := range n {
			pending, err := g.rdb.HGetAll(ctx, keysOf(ShardID(a.ID, h)).pending).Result()
			if err != nil {
				return settled, fmt.Errorf("%w: read the reservations of %s: %w", sale.ErrBusy, a.ID, err)
			}
			for token, v := range pending {
				f := strings.Split(v, "\n")
				if len(f) != 3 {
					continue
				}
				at, _ := strconv.ParseInt(f[2], 10, 64)
				if now.Sub(time.UnixMilli(at)) < olderThan {
					continue
				}
				op, shard, rec := "none", int64(0), ""
				for j := range n {
					if j == h {
						continue
					}
					r, err := g.rdb.HGet(ctx, keysOf(ShardID(a.ID, j)).grabs, token).Result()
					if errors.Is(err, redis.Nil) {
						continue
					}
					if err != nil {
						return settled, fmt.Errorf("%w: look for grab %s: %w", sale.ErrBusy, token, err)
					}
					op, shard, rec = "took", j, r
					break
				}
				if err := g.home(ctx, a, h, op, token, f[0], f[1], shard, rec); err != nil {
					return settled, fmt.Errorf("%w: settle grab %s: %w", sale.ErrBusy, token, err)
				}
				settled++
			}
		}
	}
	return settled, nil
}

// IssuePass implements sale.Gate.
func (g *Gate) IssuePass(ctx context.Context, a sale.Activity, userID, token string, now, expires time.Time) error {
	ttl := expires.Sub(now)
	if ttl <= 0 {
		return fmt.Errorf("%w: pass expires before it is issued", sale.ErrInvalid)
	}
	// Redis expires the key (a little after the pass, so that the script, not a vanished key,
	// says "expired"); the script checks the expiry itself against the grab's clock.
	if known, err := g.lookup(ctx, a.ID); err == nil {
		a = known // the layout the gate loaded
	}
	shard := ShardID(a.ID, homeShard(userID, shardsOf(a))) // where the user's grabs are checked
	err := g.rdb.Set(ctx, passKey(shard, token), userID+"\n"+strconv.FormatInt(expires.UnixMilli(), 10), ttl+time.Second).Err()
	if err != nil {
		return fmt.Errorf("%w: issue a pass on redis: %w", sale.ErrBusy, err)
	}
	return nil
}

// SpendPass implements sale.Gate, in one script (spend.lua): checked and marked spent at once, so
// that it is spent once however many joins present it at the same time. The mark names this
// call, so that go-redis resending the script after a lost reply is told "spent" again rather
// than refused.
func (g *Gate) SpendPass(ctx context.Context, activityID, userID, token string, now time.Time) error {
	a, err := g.lookup(ctx, activityID)
	if err != nil {
		return err
	}
	key := passKey(ShardID(a.ID, homeShard(userID, shardsOf(a))), token)
	n, err := g.repl.runScript(ctx, g.rdb, g.rdb, spendScript, []string{key}, userID, now.UnixMilli(),
		sale.NewGrabToken(time.Now())).Int64()
	if err != nil {
		return fmt.Errorf("%w: spend a pass on redis: %w", sale.ErrBusy, err)
	}
	if n != 1 {
		return fmt.Errorf("%w: the path token is unknown, spent, expired or someone else's", sale.ErrChallengeRequired)
	}
	return nil
}

// Release implements sale.Gate. A grab of a sharded stock holds its unit on its home shard, or
// on another one it took it from (then its home shard's "away" entry says which); the unit goes
// back where it was taken, the hold where the user's holdings are.
func (g *Gate) Release(ctx context.Context, gr sale.Grab) error {
	a, err := g.lookup(ctx, gr.ActivityID)
	if err != nil {
		return err
	}
	home := homeShard(gr.UserID, shardsOf(a))
	k := keysOf(ShardID(a.ID, home))
	n, err := g.release(ctx, a, k, gr, "")
	if n == 1 {
		g.empty.Delete(ShardID(a.ID, home))
	}
	if err != nil || n == 1 || shardsOf(a) == 1 {
		return err
	}
	v, err := g.rdb.HGet(ctx, k.away, gr.Token).Result()
	if errors.Is(err, redis.Nil) {
		return nil // released before, or unknown to this cache
	}
	if err != nil {
		return fmt.Errorf("%w: release on redis: %w", sale.ErrBusy, err)
	}
	j, err := strconv.ParseInt(v[:strings.IndexByte(v+"\n", '\n')], 10, 64)
	if err != nil || j < 0 || j >= shardsOf(a) {
		return fmt.Errorf("release on redis: grab %s is away on shard %q", gr.Token, v)
	}
	if _, err := g.release(ctx, a, keysOf(ShardID(a.ID, j)), gr, "unit"); err != nil {
		return err
	}
	g.empty.Delete(ShardID(a.ID, j))
	if err := g.home(ctx, a, home, "release", gr.Token, gr.UserID, gr.IdempotencyKey, 0, ""); err != nil {
		return fmt.Errorf("%w: release on redis: %w", sale.ErrBusy, err)
	}
	return nil
}

// release runs release.lua on the shard of keys k; it answers 1 if it gave the unit back.
func (g *Gate) release(ctx context.Context, a sale.Activity, k keys, gr sale.Grab, mode string) (int64, error) {
	n, err := g.repl.runScript(ctx, g.rdb, g.rdb, releaseScript, []string{k.stock, k.shares, k.held, k.grabs},
		gr.Token, gr.UserID, gr.Share, gr.AmountCents, string(a.Kind), mode).Int64()
	if err != nil {
		return 0, fmt.Errorf("%w: release on redis: %w", sale.ErrBusy, err)
	}
	if n < 0 {
		return 0, fmt.Errorf("release on redis: script answered %d", n)
	}
	return n, nil
}

// Drop implements sale.Gate: every key of every shard of the activity, its dead-letter stream
// included (the dead letters are in the database too). Passes expire by themselves.
func (g *Gate) Drop(ctx context.Context, activityID string) error {
	a, err := g.lookup(ctx, activityID)
	if errors.Is(err, sale.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	for i := range shardsOf(a) {
		id := ShardID(a.ID, i)
		k := keysOf(id)
		// One slot per shard: one DEL each, cluster or not.
		if err := g.rdb.Del(ctx, k.stock, k.shares, k.held, k.answers, k.grabs, k.stream, k.pending, k.away, k.shards,
			DeadKey(id)).Err(); err != nil {
			return fmt.Errorf("%w: drop activity %s from redis: %w", sale.ErrBusy, a.ID, err)
		}
		g.empty.Delete(id)
	}
	g.lanes.Delete(a.ID)
	g.mu.Lock()
	delete(g.acts, a.ID)
	g.mu.Unlock()
	return nil
}

// Remaining implements sale.Gate: the units left on every shard.
func (g *Gate) Remaining(ctx context.Context, activityID string) (int64, error) {
	n, err := g.rdb.Get(ctx, keysOf(activityID).stock).Int64()
	if errors.Is(err, redis.Nil) {
		if _, err := g.lookup(ctx, activityID); err != nil {
			return 0, err // sale.ErrNotFound for an activity nobody created
		}
		return 0, fmt.Errorf("activity %s: %w", activityID, sale.ErrUnloaded)
	}
	if err != nil {
		return 0, fmt.Errorf("%w: redis: %w", sale.ErrBusy, err)
	}
	a, err := g.lookup(ctx, activityID)
	if err != nil {
		return 0, err
	}
	for i := int64(1); i < shardsOf(a); i++ {
		m, err := g.rdb.Get(ctx, keysOf(ShardID(a.ID, i)).stock).Int64()
		if errors.Is(err, redis.Nil) {
			return 0, fmt.Errorf("activity %s, shard %d: %w", activityID, i, sale.ErrUnloaded)
		}
		if err != nil {
			return 0, fmt.Errorf("%w: redis: %w", sale.ErrBusy, err)
		}
		n += m
	}
	return n, nil
}
