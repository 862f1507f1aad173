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
}

// New returns a gate on rdb that coalesces grabs by DefaultBatching. activity is how it learns
// of activities created by other nodes.
func New(rdb redis.UniversalClient, activity func(ctx context.Context, id string) (sale.Activity, error)) *Gate {
	g := &Gate{rdb: rdb, grabs: rdb, activity: activity, acts: map[string]sale.Activity{}, batching: DefaultBatching}
	if ap, err := rdb.AutoPipeline(); err == nil {
		g.grabs = ap
	}
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

// Dial connects to Redis: a redis://host:port/db URL for one server, or comma-separated
// host:port seeds of a cluster. It checks that Redis answers. Calls honour their context's
// deadline, so a guard's deadline bounds a call to a Redis that hangs.
func Dial(ctx context.Context, spec string) (redis.UniversalClient, error) {
	var rdb redis.UniversalClient
	if strings.HasPrefix(spec, "redis://") || strings.HasPrefix(spec, "rediss://") {
		opts, err := redis.ParseURL(spec)
		if err != nil {
			return nil, fmt.Errorf("%w: redis %q: %v", sale.ErrInvalid, spec, err)
		}
		opts.DisableIdentity = true // Redis 7.0 answers CLIENT SETINFO with an error
		opts.ContextTimeoutEnabled = true
		rdb = redis.NewClient(opts)
	} else {
		seeds := strings.Split(spec, ",")
		for _, s := range seeds {
			if !strings.Contains(s, ":") {
				return nil, fmt.Errorf("%w: redis %q: want redis://host:port/db or host:port,host:port,...", sale.ErrInvalid, spec)
			}
		}
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: seeds, DisableIdentity: true, ContextTimeoutEnabled: true})
	}
	ping, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ping).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("%w: redis %s: %v", sale.ErrBusy, spec, err)
	}
	return rdb, nil
}

// keys of an activity, all in the slot of its hash tag.
type keys struct{ stock, shares, held, answers, grabs, stream string }

func keysOf(activityID string) keys {
	p := "{act:" + activityID + "}:"
	return keys{p + "stock", p + "shares", p + "held", p + "answers", p + "grabs", p + "stream"}
}

// StreamKey is the key of an activity's stream of grabs.
func StreamKey(activityID string) string { return keysOf(activityID).stream }

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

// Load implements sale.Gate: it replaces what Redis holds for a, in one MULTI/EXEC on the
// activity's slot. The stream is left alone: its entries are grabs still on their way to orders.
func (g *Gate) Load(ctx context.Context, a sale.Activity, st sale.GateState) error {
	_, err := g.load(ctx, a, st, false)
	return err
}

// Warm implements sale.Gate: WATCH on the stock key makes "absent" and the load one step, so two
// nodes starting together cannot overwrite each other's sales.
func (g *Gate) Warm(ctx context.Context, a sale.Activity, st sale.GateState) (bool, error) {
	return g.load(ctx, a, st, true)
}

var errLoaded = errors.New("loaded already")

func (g *Gate) load(ctx context.Context, a sale.Activity, st sale.GateState, onlyIfAbsent bool) (bool, error) {
	k := keysOf(a.ID)
	if err := ensureGroup(ctx, g.rdb, k.stream); err != nil {
		return false, fmt.Errorf("%w: create the consumer group of %s: %v", sale.ErrBusy, a.ID, err)
	}
	remaining := a.Stock - int64(len(st.Held))
	if a.Kind == sale.KindRedPacket {
		remaining = int64(len(st.Shares))
	}
	if remaining < 0 {
		return false, fmt.Errorf("load activity %s: %d units held of a stock of %d", a.ID, len(st.Held), a.Stock)
	}
	held := map[string]int64{}
	for _, h := range st.Held {
		held[h.UserID]++
	}
	err := g.rdb.Watch(ctx, func(tx *redis.Tx) error {
		if onlyIfAbsent {
			if n, err := tx.Exists(ctx, k.stock).Result(); err != nil {
				return err
			} else if n == 1 {
				return errLoaded
			}
		}
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, k.stock, k.shares, k.held, k.answers, k.grabs)
			if a.Kind == sale.KindRedPacket && len(st.Shares) > 0 {
				// Pushed from the last to the first, so RPOP hands them out in index order.
				vals := make([]any, 0, len(st.Shares))
				for i := len(st.Shares) - 1; i >= 0; i-- {
					vals = append(vals, strconv.FormatInt(st.Shares[i].Index, 10)+":"+strconv.FormatInt(st.Shares[i].AmountCents, 10))
				}
				p.RPush(ctx, k.shares, vals...)
			}
			for user, n := range held {
				p.HSet(ctx, k.held, user, n)
			}
			for _, h := range st.Held {
				p.HSet(ctx, k.grabs, h.Token, record(h))
			}
			for _, h := range st.Keyed {
				p.HSet(ctx, k.answers, h.UserID+"\x00"+h.IdempotencyKey, h.Token+"\n"+record(h))
			}
			p.Set(ctx, k.stock, remaining, 0) // last: its presence means "loaded"
			return nil
		})
		return err
	}, k.stock)
	g.mu.Lock()
	g.acts[a.ID] = a
	g.mu.Unlock()
	switch {
	case onlyIfAbsent && (errors.Is(err, errLoaded) || errors.Is(err, redis.TxFailedErr)):
		return false, nil // another node loaded it first
	case err != nil:
		return false, fmt.Errorf("%w: load activity %s into redis: %v", sale.ErrBusy, a.ID, err)
	}
	return true, nil
}

func record(g sale.Grab) string {
	return g.UserID + "\n" + g.IdempotencyKey + "\n" + strconv.FormatInt(g.Share, 10) + "\n" +
		strconv.FormatInt(g.AmountCents, 10) + "\n" + strconv.FormatInt(g.At.UnixMilli(), 10)
}

// parseRecord reads a grab's record (see grab.lua).
func parseRecord(activityID, token, rec string) (sale.Grab, error) {
	f := strings.Split(rec, "\n")
	if len(f) != 5 {
		return sale.Grab{}, fmt.Errorf("grab %s: malformed record %q", token, rec)
	}
	share, err1 := strconv.ParseInt(f[2], 10, 64)
	amount, err2 := strconv.ParseInt(f[3], 10, 64)
	at, err3 := strconv.ParseInt(f[4], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return sale.Grab{}, fmt.Errorf("grab %s: malformed record %q: %w", token, rec, err)
	}
	return sale.Grab{Token: token, ActivityID: activityID, UserID: f[0], IdempotencyKey: f[1], Share: share,
		AmountCents: amount, At: time.UnixMilli(at).UTC()}, nil
}

// Grab implements sale.Gate.
func (g *Gate) Grab(ctx context.Context, r sale.GrabRequest) (sale.Grab, error) {
	a, err := g.lookup(ctx, r.ActivityID)
	if err != nil {
		return sale.Grab{}, err
	}
	if g.batching.MaxBatch <= 1 {
		c := &call{req: r, token: sale.NewToken("g"), done: make(chan struct{})}
		g.flush(a, []*call{c})
		return c.res, c.err
	}
	return g.coalesce(ctx, a, r)
}

// passKey is the key of a pass, in the activity's slot: the grab script reads it with the stock.
func passKey(activityID, pass string) string { return "{act:" + activityID + "}:pass:" + pass }

// IssuePass implements sale.Gate.
func (g *Gate) IssuePass(ctx context.Context, a sale.Activity, userID, token string, now, expires time.Time) error {
	ttl := expires.Sub(now)
	if ttl <= 0 {
		return fmt.Errorf("%w: pass expires before it is issued", sale.ErrInvalid)
	}
	// Redis expires the key (a little after the pass, so that the script, not a vanished key,
	// says "expired"); the script checks the expiry itself against the grab's clock.
	err := g.rdb.Set(ctx, passKey(a.ID, token), userID+"\n"+strconv.FormatInt(expires.UnixMilli(), 10), ttl+time.Second).Err()
	if err != nil {
		return fmt.Errorf("%w: issue a pass on redis: %v", sale.ErrBusy, err)
	}
	return nil
}

// Release implements sale.Gate.
func (g *Gate) Release(ctx context.Context, gr sale.Grab) error {
	a, err := g.lookup(ctx, gr.ActivityID)
	if err != nil {
		return err
	}
	k := keysOf(a.ID)
	n, err := releaseScript.Run(ctx, g.rdb, []string{k.stock, k.shares, k.held, k.grabs},
		gr.Token, gr.UserID, gr.Share, gr.AmountCents, string(a.Kind)).Int64()
	if err != nil {
		return fmt.Errorf("%w: release on redis: %v", sale.ErrBusy, err)
	}
	if n < 0 {
		return fmt.Errorf("release on redis: script answered %d", n)
	}
	return nil
}

// Remaining implements sale.Gate.
func (g *Gate) Remaining(ctx context.Context, activityID string) (int64, error) {
	n, err := g.rdb.Get(ctx, keysOf(activityID).stock).Int64()
	if errors.Is(err, redis.Nil) {
		if _, err := g.lookup(ctx, activityID); err != nil {
			return 0, err // sale.ErrNotFound for an activity nobody created
		}
		return 0, fmt.Errorf("activity %s: %w", activityID, sale.ErrUnloaded)
	}
	if err != nil {
		return 0, fmt.Errorf("%w: redis: %v", sale.ErrBusy, err)
	}
	return n, nil
}
