package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Limits of a run, so that a typo cannot start an endless load.
const (
	MaxUsers       = 2_000_000
	MaxDup         = 100
	MaxConcurrency = 10_000
	MaxRamp        = time.Hour
)

// Crowd is the load: who clicks, how often, how many at once and when.
type Crowd struct {
	Users       int           // distinct users
	Dup         int           // extra clicks per user
	Concurrency int           // requests in flight at most
	Ramp        time.Duration // 0: every click as soon as a connection is free (burst); else spread evenly over Ramp
	Seed        uint64        // orders the clicks
	UserPrefix  string        // user ids are UserPrefix + index
}

// Validate reports a crowd that cannot run, before any request is sent.
func (c Crowd) Validate() error {
	switch {
	case c.Users < 1 || c.Users > MaxUsers:
		return fmt.Errorf("--users %d: want 1 to %d", c.Users, MaxUsers)
	case c.Dup < 0 || c.Dup > MaxDup:
		return fmt.Errorf("--dup %d: want 0 to %d", c.Dup, MaxDup)
	case c.Concurrency < 1 || c.Concurrency > MaxConcurrency:
		return fmt.Errorf("--concurrency %d: want 1 to %d", c.Concurrency, MaxConcurrency)
	case c.Ramp < 0 || c.Ramp > MaxRamp:
		return fmt.Errorf("ramp %s: want at most %s", c.Ramp, MaxRamp)
	}
	return nil
}

// User is the id of user i.
func (c Crowd) User(i int) string { return fmt.Sprint(c.UserPrefix, i) }

// Clicks is the users' clicks in the order they are sent: each user 1+Dup times, shuffled by Seed.
func (c Crowd) Clicks() []int32 {
	clicks := make([]int32, 0, c.Users*(1+c.Dup))
	for range 1 + c.Dup {
		for u := range c.Users {
			clicks = append(clicks, int32(u))
		}
	}
	return c.Shuffled(clicks, 0)
}

// Shuffled returns the users' clicks (user indexes) in an order drawn from the crowd's seed and
// salt.
func (c Crowd) Shuffled(clicks []int32, salt uint64) []int32 {
	r := rand.New(rand.NewPCG(c.Seed, 0x5ec4111^salt))
	r.Shuffle(len(clicks), func(i, j int) { clicks[i], clicks[j] = clicks[j], clicks[i] })
	return clicks
}

// Run sends clicks (user indexes) at activity, with the crowd's concurrency and arrival, and
// returns every request's record, in the order they were sent. bearer gives user i's token; done,
// if set, is called after each answer. A cancelled ctx stops the crowd: clicks not yet sent are
// left out of the history.
func Run(ctx context.Context, c *Client, activity string, crowd Crowd, clicks []int32, bearer func(int) string, done func()) []Record {
	records := make([]Record, len(clicks))
	var next atomic.Int64
	c.Open(ctx, min(crowd.Concurrency, len(clicks)))
	start := time.Now()
	var wg sync.WaitGroup
	for range crowd.Concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(clicks) || ctx.Err() != nil {
					return
				}
				due := start
				if crowd.Ramp > 0 {
					due = start.Add(time.Duration(int64(crowd.Ramp) * int64(i) / int64(len(clicks))))
					if wait := time.Until(due); wait > 0 {
						select {
						case <-ctx.Done():
							return
						case <-time.After(wait):
						}
					}
				}
				u := int(clicks[i])
				r := c.Grab(ctx, i, activity, crowd.User(u), bearer(u))
				if crowd.Ramp > 0 {
					r.Intended = due.UnixMicro()
				} else {
					r.Intended = r.Start
				}
				records[i] = r
				if done != nil {
					done()
				}
			}
		})
	}
	wg.Wait()
	out := records[:0]
	for _, r := range records {
		if r.User != "" {
			out = append(out, r)
		}
	}
	return out
}
