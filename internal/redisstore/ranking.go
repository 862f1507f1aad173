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

	"seckill/internal/rank"
	"seckill/internal/sale"
)

var _ sale.Ranking = (*Ranking)(nil)

// Ranking keeps red packets' leaderboards on Redis, shared by every node, in the activity's slot:
// a sorted set for an activity of up to exactMax shares, a hash of histogram buckets beyond.
//
// The sorted set's score is the amount; equal amounts are ordered by the member, which Redis
// compares byte by byte, so the member begins with what breaks the tie: the grab time counted
// down from the year 2286 (earlier grabs sort higher) and the grab token with every byte
// complemented (smaller tokens sort higher), then the user.
type Ranking struct {
	rdb      redis.UniversalClient
	exactMax int64
	// metas caches each activity's strategy and range once read: a leaderboard keeps them for
	// its life, so a rank query costs one round trip.
	metas sync.Map // activity id -> rankMeta
}

type rankMeta struct {
	strategy string
	max      int64
}

// NewRanking returns leaderboards on rdb, exact up to exactMax shares.
func NewRanking(rdb redis.UniversalClient, exactMax int64) *Ranking {
	return &Ranking{rdb: rdb, exactMax: exactMax}
}

const lastMilli = 9_999_999_999_999 // 2286-11-20, in Unix milliseconds

// Drop implements sale.Ranking.
func (r *Ranking) Drop(ctx context.Context, activityID string) error {
	k := rankKeysOf(activityID)
	if err := r.rdb.Del(ctx, k.zset, k.hist, k.meta, k.gone).Err(); err != nil {
		return sale.Busy(err, "drop the leaderboard of %s", activityID)
	}
	r.metas.Delete(activityID)
	return nil
}

func rankMember(g sale.Grab) string {
	tok := []byte(g.Token)
	for i := range tok {
		tok[i] = ^tok[i]
	}
	return fmt.Sprintf("%013d|%s|%s", lastMilli-g.At.UnixMilli(), tok, g.UserID)
}

func parseRankMember(m string) (user string, at time.Time, err error) {
	f := strings.SplitN(m, "|", 3)
	if len(f) != 3 {
		return "", time.Time{}, fmt.Errorf("leaderboard member %q is malformed", m)
	}
	left, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("leaderboard member %q: %w", m, err)
	}
	return f[2], time.UnixMilli(lastMilli - left).UTC(), nil
}

// Load implements sale.Ranking: it rebuilds the leaderboard in one transaction.
func (r *Ranking) Load(ctx context.Context, a sale.Activity, held []sale.Grab, max int64) error {
	k := rankKeysOf(a.ID)
	_, err := r.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, k.zset, k.hist, k.meta)
		if a.Stock <= r.exactMax {
			p.HSet(ctx, k.meta, "strategy", sale.RankExact)
			for lo := 0; lo < len(held); lo += 1000 {
				zs := make([]redis.Z, 0, 1000)
				for _, g := range held[lo:min(lo+1000, len(held))] {
					zs = append(zs, redis.Z{Score: float64(g.AmountCents), Member: rankMember(g)})
				}
				p.ZAdd(ctx, k.zset, zs...)
			}
			return nil
		}
		h := rank.NewApprox(max, rank.Buckets)
		for _, g := range held {
			h.Add(g.AmountCents)
		}
		p.HSet(ctx, k.meta, "strategy", sale.RankApprox, "max", max)
		for b, n := range h.Counts() {
			if n != 0 {
				p.HSet(ctx, k.hist, strconv.Itoa(b), n)
			}
		}
		return nil
	})
	if err != nil {
		return sale.Busy(err, "load the leaderboard of %s", a.ID)
	}
	r.metas.Delete(a.ID)
	return nil
}

// meta reads an activity's strategy and, for a histogram, its range.
func (r *Ranking) meta(ctx context.Context, activityID string) (string, int64, error) {
	if m, ok := r.metas.Load(activityID); ok {
		return m.(rankMeta).strategy, m.(rankMeta).max, nil
	}
	m, err := r.rdb.HGetAll(ctx, rankKeysOf(activityID).meta).Result()
	if err != nil {
		return "", 0, sale.Busy(err, "leaderboard of %s", activityID)
	}
	if m["strategy"] == "" {
		return "", 0, fmt.Errorf("%w: no leaderboard loaded for %s", sale.ErrNotFound, activityID)
	}
	max, _ := strconv.ParseInt(m["max"], 10, 64)
	r.metas.Store(activityID, rankMeta{m["strategy"], max})
	return m["strategy"], max, nil
}

// rankScript changes a leaderboard for a batch of grabs (see rank.lua).
var (
	//go:embed rank.lua
	rankLua    string
	rankScript = redis.NewScript(rankLua)
)

// change adds, removes or restores (op: rank.lua's) gs on their leaderboards, one script call
// per activity, the calls in one pipeline (a worker's batch is one round trip).
func (r *Ranking) change(ctx context.Context, gs []sale.Grab, op string) error {
	byActivity := map[string][]any{}
	var order []string
	for _, g := range gs {
		strategy, max, err := r.meta(ctx, g.ActivityID)
		if errors.Is(err, sale.ErrNotFound) {
			continue // no leaderboard loaded: the next load reads the database
		}
		if err != nil {
			return err
		}
		args, ok := byActivity[g.ActivityID]
		if !ok {
			args = []any{op, strategy}
			order = append(order, g.ActivityID)
		}
		bucket := 0
		if strategy != sale.RankExact {
			bucket = rank.BucketOf(g.AmountCents, max, rank.Buckets)
		}
		byActivity[g.ActivityID] = append(args, rankMember(g), g.AmountCents, bucket)
	}
	if len(order) == 0 {
		return nil
	}
	var err error
	for loaded := false; ; loaded = true {
		_, err = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, id := range order {
				k := rankKeysOf(id)
				rankScript.EvalSha(ctx, p, []string{k.zset, k.hist, k.gone}, byActivity[id]...)
			}
			return nil
		})
		if loaded || !redis.HasErrorPrefix(err, "NOSCRIPT") {
			break
		}
		// A server that does not know the script yet (new, or promoted): load it, once more.
		if err = rankScript.Load(ctx, r.rdb).Err(); err != nil {
			break
		}
	}
	if err != nil && !errors.Is(err, sale.ErrBusy) {
		return sale.Busy(err, "leaderboard")
	}
	return err
}

// Add implements sale.Ranking.
func (r *Ranking) Add(ctx context.Context, gs []sale.Grab) error { return r.change(ctx, gs, "add") }

// Remove implements sale.Ranking: each grab once, however often told; an add or restore told
// after it leaves the grab off.
func (r *Ranking) Remove(ctx context.Context, gs []sale.Grab) error {
	return r.change(ctx, gs, "remove")
}

// Restore implements sale.Ranking.
func (r *Ranking) Restore(ctx context.Context, gs []sale.Grab) error {
	return r.change(ctx, gs, "restore")
}

// Top implements sale.Ranking.
func (r *Ranking) Top(ctx context.Context, activityID string, n int) ([]sale.Standing, error) {
	strategy, _, err := r.meta(ctx, activityID)
	if err != nil {
		return nil, err
	}
	if strategy != sale.RankExact {
		return nil, sale.ErrApproximate
	}
	zs, err := r.rdb.ZRevRangeWithScores(ctx, rankKeysOf(activityID).zset, 0, int64(n-1)).Result()
	if err != nil {
		return nil, sale.Busy(err, "leaderboard of %s", activityID)
	}
	out := make([]sale.Standing, len(zs))
	for i, z := range zs {
		m, _ := z.Member.(string)
		user, at, err := parseRankMember(m)
		if err != nil {
			return nil, err
		}
		out[i] = sale.Standing{Rank: int64(i + 1), UserID: user, AmountCents: int64(z.Score), GrabbedAt: at}
	}
	return out, nil
}

// Rank implements sale.Ranking.
func (r *Ranking) Rank(ctx context.Context, g sale.Grab) (int64, int64, string, error) {
	strategy, max, err := r.meta(ctx, g.ActivityID)
	if err != nil {
		return 0, 0, "", err
	}
	k := rankKeysOf(g.ActivityID)
	if strategy == sale.RankExact {
		n, err := r.rdb.ZRevRank(ctx, k.zset, rankMember(g)).Result()
		if errors.Is(err, redis.Nil) {
			return 0, 0, "", sale.ErrNotFound
		}
		if err != nil {
			return 0, 0, "", sale.Busy(err, "leaderboard of %s", g.ActivityID)
		}
		return n + 1, 0, sale.RankExact, nil
	}
	counts, err := r.rdb.HGetAll(ctx, k.hist).Result()
	if err != nil {
		return 0, 0, "", sale.Busy(err, "leaderboard of %s", g.ActivityID)
	}
	h := rank.NewApprox(max, rank.Buckets)
	for b, n := range counts {
		i, err1 := strconv.Atoi(b)
		c, err2 := strconv.ParseInt(n, 10, 64)
		if err1 == nil && err2 == nil {
			h.Set(i, c)
		}
	}
	est, bound := h.Rank(g.AmountCents)
	return est, bound, sale.RankApprox, nil
}

// Usage implements sale.Ranking: the strategy and what Redis says the keys take.
func (r *Ranking) Usage(ctx context.Context, activityID string) (string, int64, error) {
	strategy, _, err := r.meta(ctx, activityID)
	if err != nil {
		return "", 0, err
	}
	k := rankKeysOf(activityID)
	key := k.zset
	if strategy != sale.RankExact {
		key = k.hist
	}
	n, err := r.rdb.MemoryUsage(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return strategy, 0, nil
	}
	if err != nil {
		return "", 0, sale.Busy(err, "leaderboard of %s", activityID)
	}
	return strategy, n, nil
}
