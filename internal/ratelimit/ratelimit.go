// Package ratelimit decides whether one more request may pass a limit: token buckets (a user, an
// activity's whole crowd) and sliding windows (a client IP), kept in this process for the
// embedded mode or on Redis so that every node of a cluster shares them.
package ratelimit

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Rule is a limit: PerSecond events a second, with bursts of up to Burst (at least 1). A zero
// PerSecond is no limit.
type Rule struct {
	PerSecond int
	Burst     int
}

// Off reports whether the rule limits nothing.
func (r Rule) Off() bool { return r.PerSecond <= 0 }

func (r Rule) burst() int { return max(r.Burst, 1) }

// Decision is a limiter's answer. RetryAfter, when the request is refused, is how long until one
// would pass.
type Decision struct {
	Allowed    bool
	RetryAfter time.Duration
}

// Limiter decides on one more event under key. Keys name what is limited ("user:alice").
type Limiter interface {
	Allow(ctx context.Context, key string, r Rule) (Decision, error)
}

// idleAfter is how long a local key may go unused before it is forgotten: long enough that a
// forgotten bucket or window would have been full (or empty) again anyway.
const idleAfter = time.Minute

// Buckets are token buckets in this process (golang.org/x/time/rate), one per key, forgotten
// after a minute unused. Keys are spread over shards, so that the crowd's requests rarely wait
// for one another's lock.
type Buckets struct {
	now    func() time.Time
	seed   maphash.Seed
	shards [shards]bucketShard
}

type bucketShard struct {
	mu    sync.Mutex
	m     map[string]*bucket
	swept time.Time
}

// shards is how many shards a local limiter's keys are spread over.
const shards = 16

type bucket struct {
	lim  *rate.Limiter
	rule Rule
	used time.Time
}

// NewBuckets returns local token buckets; now is the clock (time.Now in production).
func NewBuckets(now func() time.Time) *Buckets {
	b := &Buckets{now: now, seed: maphash.MakeSeed()}
	for i := range b.shards {
		b.shards[i] = bucketShard{m: map[string]*bucket{}, swept: now()}
	}
	return b
}

// Allow implements Limiter.
func (b *Buckets) Allow(_ context.Context, key string, r Rule) (Decision, error) {
	if r.Off() {
		return Decision{Allowed: true}, nil
	}
	now := b.now()
	sh := &b.shards[maphash.String(b.seed, key)%shards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.sweep(now)
	k := sh.m[key]
	if k == nil || k.rule != r {
		k = &bucket{lim: rate.NewLimiter(rate.Limit(r.PerSecond), r.burst()), rule: r}
		sh.m[key] = k
	}
	k.used = now
	if k.lim.AllowN(now, 1) {
		return Decision{Allowed: true}, nil
	}
	// Refused, and nothing taken: the wait is for the one token missing.
	missing := 1 - k.lim.TokensAt(now)
	return Decision{RetryAfter: time.Duration(missing / float64(k.lim.Limit()) * float64(time.Second))}, nil
}

// sweep forgets the keys unused for idleAfter, at most once per idleAfter. The caller holds mu.
func (sh *bucketShard) sweep(now time.Time) {
	if now.Sub(sh.swept) < idleAfter {
		return
	}
	sh.swept = now
	for key, k := range sh.m {
		if now.Sub(k.used) >= idleAfter {
			delete(sh.m, key)
		}
	}
}

// Windows are sliding windows of one second in this process, one per key: a request passes when
// the count of the last second, estimated from the current and the previous fixed second (the
// previous one weighted by how much of it the sliding second still covers), is below the rule's
// PerSecond (its Burst is not used). Unlike a fixed window, a client cannot pass twice the limit
// across a window's edge.
type Windows struct {
	now    func() time.Time
	seed   maphash.Seed
	shards [shards]windowShard
}

type windowShard struct {
	mu    sync.Mutex
	m     map[string]*window
	swept time.Time
}

type window struct {
	start      int64 // the current fixed second, Unix seconds
	prev, curr int
}

// NewWindows returns local sliding windows; now is the clock.
func NewWindows(now func() time.Time) *Windows {
	w := &Windows{now: now, seed: maphash.MakeSeed()}
	for i := range w.shards {
		w.shards[i] = windowShard{m: map[string]*window{}, swept: now()}
	}
	return w
}

// Allow implements Limiter.
func (w *Windows) Allow(_ context.Context, key string, r Rule) (Decision, error) {
	if r.Off() {
		return Decision{Allowed: true}, nil
	}
	now := w.now()
	sec := now.Unix()
	sh := &w.shards[maphash.String(w.seed, key)%shards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sec-sh.swept.Unix() >= int64(idleAfter/time.Second) {
		sh.swept = now
		for k, win := range sh.m {
			if sec-win.start > 1 {
				delete(sh.m, k)
			}
		}
	}
	win := sh.m[key]
	switch {
	case win == nil:
		win = &window{start: sec}
		sh.m[key] = win
	case sec == win.start+1:
		win.start, win.prev, win.curr = sec, win.curr, 0
	case sec > win.start+1:
		win.start, win.prev, win.curr = sec, 0, 0
	}
	elapsed := float64(now.UnixNano()%1e9) / 1e9
	if estimate(win.prev, win.curr, elapsed) >= float64(r.PerSecond) {
		return Decision{RetryAfter: windowRetry(win.prev, win.curr, elapsed, r.PerSecond)}, nil
	}
	win.curr++
	return Decision{Allowed: true}, nil
}

// estimate is the sliding window's count: all of the current second and the share of the
// previous one the last second still covers.
func estimate(prev, curr int, elapsed float64) float64 {
	return float64(prev)*(1-elapsed) + float64(curr)
}

// windowRetry is how long until the estimate falls below limit: the previous second's weight
// shrinks as the window slides; when the current second alone is full, the next second.
func windowRetry(prev, curr int, elapsed float64, limit int) time.Duration {
	if curr < limit && prev > 0 {
		// prev*(1-e') + curr < limit  <=>  e' > 1 - (limit-curr)/prev
		at := 1 - float64(limit-curr)/float64(prev)
		if at > elapsed {
			return time.Duration(math.Ceil((at - elapsed) * 1e9))
		}
	}
	return time.Duration(math.Ceil((1 - elapsed) * 1e9))
}

// RetryAfterSeconds is the Retry-After header value for d: whole seconds, at least 1.
func RetryAfterSeconds(d time.Duration) string {
	s := max(int64(math.Ceil(d.Seconds())), 1)
	if s < int64(len(smallSeconds)) {
		return smallSeconds[s]
	}
	return fmt.Sprint(s)
}

// smallSeconds spares the usual answers a conversion.
var smallSeconds = func() (out [61]string) {
	for i := range out {
		out[i] = fmt.Sprint(i)
	}
	return out
}()
