package ratelimit

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// RedisBuckets are token buckets on Redis, shared by every node: GCRA, by
// github.com/go-redis/redis_rate (one key per bucket, so any Redis Cluster slot will do).
//
// The Redis gate runs the same algorithm in its grab script (redisstore's grab.lua) for another
// bucket: a user's grabs of one activity admitted directly, kept on the activity's slot so that
// the grab costs one Redis call. The two are different limits (other keys, other callers), not
// one written twice; the edge checks a request in one or the other (httpapi.Limits.UserAtGate).
type RedisBuckets struct {
	lim *redis_rate.Limiter
}

// NewRedisBuckets returns token buckets on rdb. Concurrent checks share go-redis's automatic
// pipeline: a crowd's checks cost Redis and this process a read and a write per batch, not per
// request.
func NewRedisBuckets(rdb redis.UniversalClient) *RedisBuckets {
	if ap, err := rdb.AutoPipeline(); err == nil {
		return &RedisBuckets{lim: redis_rate.NewLimiter(ap)}
	}
	return &RedisBuckets{lim: redis_rate.NewLimiter(rdb)}
}

// Allow implements Limiter.
func (b *RedisBuckets) Allow(ctx context.Context, key string, r Rule) (Decision, error) {
	if r.Off() {
		return Decision{Allowed: true}, nil
	}
	res, err := b.lim.Allow(ctx, key, redis_rate.Limit{Rate: r.PerSecond, Burst: r.burst(), Period: time.Second})
	if err != nil {
		return Decision{}, fmt.Errorf("rate limit %s on redis: %w", key, err)
	}
	if res.Allowed == 0 {
		return Decision{RetryAfter: max(res.RetryAfter, time.Millisecond)}, nil
	}
	return Decision{Allowed: true}, nil
}

//go:embed window.lua
var windowLua string

var windowScript = redis.NewScript(windowLua)

// RedisWindows are the sliding windows of Windows on Redis, shared by every node. The second a
// request falls in is read from the node's clock, so nodes whose clocks disagree by a fraction of
// a second count a little differently near the edge of a second.
type RedisWindows struct {
	rdb redis.Scripter
	now func() time.Time
}

// NewRedisWindows returns sliding windows on rdb (on its automatic pipeline, as the buckets);
// now is the clock.
func NewRedisWindows(rdb redis.UniversalClient, now func() time.Time) *RedisWindows {
	if ap, err := rdb.AutoPipeline(); err == nil {
		return &RedisWindows{rdb: ap, now: now}
	}
	return &RedisWindows{rdb: rdb, now: now}
}

// Allow implements Limiter.
func (w *RedisWindows) Allow(ctx context.Context, key string, r Rule) (Decision, error) {
	if r.Off() {
		return Decision{Allowed: true}, nil
	}
	now := w.now()
	sec := now.Unix()
	elapsed := float64(now.UnixNano()%1e9) / 1e9
	tag := "{rlw:" + key + "}:" // both seconds of a key in one cluster slot
	res, err := windowScript.Run(ctx, w.rdb, []string{tag + strconv.FormatInt(sec, 10), tag + strconv.FormatInt(sec-1, 10)},
		r.PerSecond, strconv.FormatFloat(elapsed, 'f', 6, 64)).Int64Slice()
	if err != nil {
		return Decision{}, fmt.Errorf("rate limit %s on redis: %w", key, err)
	}
	if len(res) != 3 {
		return Decision{}, fmt.Errorf("rate limit %s on redis: script answered %v", key, res)
	}
	if res[0] == 1 {
		return Decision{Allowed: true}, nil
	}
	return Decision{RetryAfter: windowRetry(int(res[1]), int(res[2]), elapsed, r.PerSecond)}, nil
}
