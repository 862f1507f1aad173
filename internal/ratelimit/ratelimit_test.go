package ratelimit_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/saletest"

	"github.com/redis/go-redis/v9"

	"seckill/internal/ratelimit"
	"seckill/internal/redisstore"
	"seckill/internal/redistest"
)

// clock is a settable clock for the limiters.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// t0 is the start of a second.
var t0 = saletest.T0

func allow(t *testing.T, l ratelimit.Limiter, key string, r ratelimit.Rule) ratelimit.Decision {
	t.Helper()
	d, err := l.Allow(context.Background(), key, r)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// passes sends n requests and returns how many passed.
func passes(t *testing.T, l ratelimit.Limiter, key string, r ratelimit.Rule, n int) int {
	t.Helper()
	ok := 0
	for range n {
		if allow(t, l, key, r).Allowed {
			ok++
		}
	}
	return ok
}

func TestBuckets(t *testing.T) {
	c := &clock{t: t0}
	b := ratelimit.NewBuckets(c.now)
	r := ratelimit.Rule{PerSecond: 5, Burst: 5}
	if n := passes(t, b, "user:a", r, 20); n != 5 {
		t.Fatalf("%d of 20 passed at once, want the burst of 5", n)
	}
	d := allow(t, b, "user:a", r)
	if d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > 200*time.Millisecond {
		t.Fatalf("refused request: %+v, want a retry within 1/5 s", d)
	}
	if n := passes(t, b, "user:b", r, 5); n != 5 {
		t.Fatalf("another key passed %d of 5: keys must not share a bucket", n)
	}
	c.set(t0.Add(d.RetryAfter))
	if !allow(t, b, "user:a", r).Allowed {
		t.Fatal("refused after its RetryAfter")
	}
	c.set(t0.Add(10 * time.Second)) // refilled, and the sweep may forget idle keys meanwhile
	if n := passes(t, b, "user:a", r, 20); n != 5 {
		t.Fatalf("%d passed after 10 s, want a full burst of 5", n)
	}
	if n := passes(t, b, "user:a", ratelimit.Rule{}, 100); n != 100 {
		t.Fatalf("an off rule let %d of 100 pass", n)
	}
}

// windowTests run against the local and the Redis sliding windows, on a clock the test sets.
func windowTests(t *testing.T, newWindows func(now func() time.Time) ratelimit.Limiter) {
	r := ratelimit.Rule{PerSecond: 10}
	t.Run("limit within a second", func(t *testing.T) {
		c := &clock{t: t0.Add(100 * time.Millisecond)}
		w := newWindows(c.now)
		if n := passes(t, w, "ip:1", r, 30); n != 10 {
			t.Fatalf("%d of 30 passed within a second, want 10", n)
		}
		d := allow(t, w, "ip:1", r)
		if d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > time.Second {
			t.Fatalf("refused request: %+v", d)
		}
	})
	t.Run("no double burst across the edge", func(t *testing.T) {
		c := &clock{t: t0.Add(990 * time.Millisecond)}
		w := newWindows(c.now)
		first := passes(t, w, "ip:2", r, 30)
		c.set(t0.Add(1010 * time.Millisecond))
		second := passes(t, w, "ip:2", r, 30)
		if first != 10 || second > 1 {
			t.Fatalf("%d then %d passed 20 ms apart across a second's edge; a fixed window would let 20 through", first, second)
		}
	})
	t.Run("the window slides", func(t *testing.T) {
		c := &clock{t: t0.Add(100 * time.Millisecond)}
		w := newWindows(c.now)
		passes(t, w, "ip:3", r, 10)
		c.set(t0.Add(1500 * time.Millisecond)) // half of the previous second still counts: 5
		if n := passes(t, w, "ip:3", r, 30); n != 5 {
			t.Fatalf("%d passed half a second into the next second, want 5", n)
		}
		c.set(t0.Add(3 * time.Second))
		if n := passes(t, w, "ip:3", r, 30); n != 10 {
			t.Fatalf("%d passed two seconds later, want 10", n)
		}
	})
	t.Run("retry after is when one would pass", func(t *testing.T) {
		c := &clock{t: t0.Add(200 * time.Millisecond)}
		w := newWindows(c.now)
		passes(t, w, "ip:4", r, 10) // the previous second full
		c.set(t0.Add(1200 * time.Millisecond))
		passes(t, w, "ip:4", r, 30) // 10*0.8 = 8: two more pass
		d := allow(t, w, "ip:4", r)
		if d.Allowed {
			t.Fatal("passed over the limit")
		}
		c.set(t0.Add(1200*time.Millisecond + d.RetryAfter + time.Millisecond))
		if !allow(t, w, "ip:4", r).Allowed {
			t.Fatalf("still refused after RetryAfter %s", d.RetryAfter)
		}
	})
	t.Run("concurrent requests", func(t *testing.T) {
		c := &clock{t: t0.Add(100 * time.Millisecond)}
		w := newWindows(c.now)
		var ok atomic.Int64
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				for range 25 {
					if allow(t, w, "ip:5", ratelimit.Rule{PerSecond: 50}).Allowed {
						ok.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if ok.Load() != 50 {
			t.Fatalf("%d of 500 concurrent requests passed a limit of 50", ok.Load())
		}
	})
}

func TestWindows(t *testing.T) {
	windowTests(t, func(now func() time.Time) ratelimit.Limiter { return ratelimit.NewWindows(now) })
}

func TestRedisWindows(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	windowTests(t, func(now func() time.Time) ratelimit.Limiter {
		rdb := dial(t, srv.URL())
		rdb.FlushAll(context.Background()) // each subtest on fresh keys
		return ratelimit.NewRedisWindows(rdb, now)
	})
}

// TestRedisWindowsOnACluster: every subtest limits keys of its own.
func TestRedisWindowsOnACluster(t *testing.T) {
	c := redistest.StartCluster(t)
	windowTests(t, func(now func() time.Time) ratelimit.Limiter {
		return ratelimit.NewRedisWindows(dial(t, c.Seeds()), now)
	})
}

// TestRedisBuckets: the GCRA buckets keep Redis's own time, so this test waits in real time.
func TestRedisBuckets(t *testing.T) {
	for name, spec := range map[string]func(t *testing.T) string{
		"single":  func(t *testing.T) string { return redistest.Start(t, redistest.Options{}).URL() },
		"cluster": func(t *testing.T) string { return redistest.StartCluster(t).Seeds() },
	} {
		t.Run(name, func(t *testing.T) {
			b := ratelimit.NewRedisBuckets(dial(t, spec(t)))
			r := ratelimit.Rule{PerSecond: 5, Burst: 5}
			key := fmt.Sprint("user:", name, os.Getpid())
			if n := passes(t, b, key, r, 20); n != 5 {
				t.Fatalf("%d of 20 passed at once, want the burst of 5", n)
			}
			d := allow(t, b, key, r)
			if d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > 250*time.Millisecond {
				t.Fatalf("refused request: %+v, want a retry within about 1/5 s", d)
			}
			time.Sleep(d.RetryAfter + 20*time.Millisecond)
			if !allow(t, b, key, r).Allowed {
				t.Fatal("refused after its RetryAfter")
			}
			var ok atomic.Int64
			var wg sync.WaitGroup
			other := key + ":concurrent"
			big := ratelimit.Rule{PerSecond: 1, Burst: 40}
			for range 10 {
				wg.Go(func() {
					for range 20 {
						if allow(t, b, other, big).Allowed {
							ok.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if ok.Load() < 40 || ok.Load() > 41 { // one token may refill during the run
				t.Fatalf("%d of 200 concurrent requests passed a burst of 40", ok.Load())
			}
		})
	}
}

func dial(t *testing.T, spec string) redis.UniversalClient {
	t.Helper()
	rdb, err := redisstore.Dial(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return rdb
}
