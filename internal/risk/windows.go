package risk

import (
	"context"
	"math"
	"sync"
	"time"
)

// Windows keeps what the risk checks count over a sliding window, and is where the features'
// windows and those of the rules that count (AccountsPerIP, Cadence) live: per client address
// and per device fingerprint the requests and the distinct accounts, per exact page signals the
// requests (replays), per user the last clicks and challenge solve.
//
// One node keeps them in its memory (NewMemoryWindows). A cluster must share them: the load
// balancer spreads a farm's accounts, and one user's clicks, over the nodes, and a node that
// counts alone sees a twelfth of a farm on twelve nodes. The distributed mode keeps them on Redis
// (redisstore.RiskWindows), counting a grab in one round trip.
type Windows interface {
	// Count counts a grab under its keys at at, and returns what the windows then hold of them.
	// Errors: the store failed (the grab's risk cannot be judged).
	Count(ctx context.Context, k Keys, at time.Time) (Seen, error)
	// Solved records that user answered a challenge right in solve, at at.
	Solved(ctx context.Context, user string, solve time.Duration, at time.Time) error
}

// Keys are what one grab is counted under; an empty one is not counted.
type Keys struct {
	IP          string // the client's address
	Fingerprint string // the page's device fingerprint
	Replay      string // the digest of the page's exact signals (Page.digest: 12 bytes)
	User        string // counted among the accounts of the address and of the fingerprint
	// Clicks counts the grab among the User's clicks, and reads the user's last solve.
	Clicks bool
	// MaxUsers is how many distinct users are remembered per address or fingerprint (64 if
	// zero): their count saturates there. The most a rule or the features weigh.
	MaxUsers int
}

// MaxClicks is how many of a user's last clicks the windows keep: the features' cadence looks at
// them, and the Cadence rule at its Clicks of them when the windows are shared.
const MaxClicks = 8

// Seen is what the windows hold of a grab's keys once it is counted, inside the window.
type Seen struct {
	// IPRequests, FPRequests and Replays are the requests of the window before this one.
	IPRequests, FPRequests, Replays int
	// IPUsers and FPUsers are the distinct users of the window, this one's included (0 without
	// a user), at most Keys.MaxUsers.
	IPUsers, FPUsers int
	// Clicks are the user's last clicks inside the window, Unix nanoseconds, newest first (this
	// one among them); 0 past the last.
	Clicks [MaxClicks]int64
	// Solved says the user answered a challenge inside the window, in Solve.
	Solved bool
	Solve  time.Duration
}

// WindowSlices is the number of slices a window is kept in: a count is of the slices still inside
// it, so a request leaves the count between 5/6 and the whole of the window after it came.
const WindowSlices = 6

// SliceOf is the number of the slice of window that t falls in.
func SliceOf(t time.Time, window time.Duration) int64 {
	return t.UnixNano() / int64(window/WindowSlices)
}

// Inside reports whether slice is still inside the window at slice now.
func Inside(slice, now int64) bool { return now-slice < WindowSlices }

// SortClicks puts clicks newest first (a store shared by nodes keeps them in the order they
// arrived, which the nodes' clocks may disagree with by a little).
func SortClicks(c *[MaxClicks]int64) {
	for i := 1; i < len(c); i++ {
		for j := i; j > 0 && c[j] > c[j-1]; j-- {
			c[j], c[j-1] = c[j-1], c[j]
		}
	}
}

// The bounds of the windows.
const (
	maxKeyUsers  = 64     // distinct users remembered per address or fingerprint unless Keys say more
	maxShardKeys = 16_384 // keys per shard before the shard forgets everything (a flood of new keys)
)

// UsersKept is how many distinct users the windows remember per key for k: MaxUsers, or 64.
func (k Keys) UsersKept() int {
	if k.MaxUsers > 0 {
		return k.MaxUsers
	}
	return maxKeyUsers
}

// memoryWindows keeps the windows in this process, sharded and bounded: a node's own.
type memoryWindows struct {
	window  time.Duration
	maxKeys int // per shard and kind: maxShardKeys

	addrs, prints, replays keyed
	users                  [shards]struct {
		mu    sync.Mutex
		m     map[string]*userState
		swept int64
	}
}

// NewMemoryWindows returns windows of window (DefaultWindow if zero) in this process's memory,
// bounded: Keys.UsersKept users remembered per key, and a shard flooded with new keys forgets
// them.
func NewMemoryWindows(window time.Duration) Windows { return newMemoryWindows(window) }

func newMemoryWindows(window time.Duration) *memoryWindows {
	if window <= 0 {
		window = DefaultWindow
	}
	return &memoryWindows{window: window, maxKeys: maxShardKeys}
}

func (w *memoryWindows) slice(t time.Time) int64 { return SliceOf(t, w.window) }

func (w *memoryWindows) sliceOfNanos(ns int64) int64 { return ns / int64(w.window/WindowSlices) }

// Count implements Windows; it never fails.
func (w *memoryWindows) Count(_ context.Context, k Keys, at time.Time) (Seen, error) {
	return w.count(k, at), nil
}

func (w *memoryWindows) count(k Keys, at time.Time) Seen {
	var s Seen
	now := w.slice(at)
	if k.Fingerprint != "" {
		s.FPRequests, s.FPUsers = w.prints.add(k.Fingerprint, k.User, now, w.maxKeys, k.UsersKept())
	}
	if k.Replay != "" {
		s.Replays, _ = w.replays.add(k.Replay, "", now, w.maxKeys, 0)
	}
	if k.IP != "" {
		s.IPRequests, s.IPUsers = w.addrs.add(k.IP, k.User, now, w.maxKeys, k.UsersKept())
	}
	if k.User != "" && k.Clicks {
		ns := at.UnixNano()
		w.user(k.User, now, func(u *userState) {
			u.clicks[u.next] = ns
			u.next = (u.next + 1) % len(u.clicks)
			n := len(u.clicks)
			for i := range n { // newest first, those inside the window
				c := u.clicks[(u.next-1-i+2*n)%n]
				if c == 0 || !Inside(w.sliceOfNanos(c), now) {
					break
				}
				s.Clicks[i] = c
			}
			if Inside(u.solvedAt, now) {
				s.Solved, s.Solve = true, u.solve
			}
		})
	}
	return s
}

// Solved implements Windows; it never fails.
func (w *memoryWindows) Solved(_ context.Context, user string, solve time.Duration, at time.Time) error {
	now := w.slice(at)
	w.user(user, now, func(u *userState) { u.solve, u.solvedAt = solve, now })
	return nil
}

// keyed counts the requests and distinct users per key over the window.
type keyed [shards]struct {
	mu    sync.Mutex
	m     map[string]*counter
	swept int64
}

type counter struct {
	at    [WindowSlices]int64 // the slice each count is of
	n     [WindowSlices]uint32
	users map[string]int64 // user -> the slice last seen in
}

// add counts a request of user (may be "") under key at slice now, and returns the requests
// before this one and the distinct users, this one's included, of the window (maxUsers of
// them at most).
func (k *keyed) add(key, user string, now int64, maxKeys, maxUsers int) (before, users int) {
	sh := &k[shardOf(key)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.m == nil || len(sh.m) >= maxKeys && now-sh.swept < WindowSlices {
		sh.m = map[string]*counter{} // bounded: a flood of new keys forgets the shard
		sh.swept = now
	}
	if now-sh.swept >= WindowSlices { // forget the keys the window has left behind
		for key, c := range sh.m {
			if now-c.latest() >= WindowSlices {
				delete(sh.m, key)
			}
		}
		sh.swept = now
	}
	c := sh.m[key]
	if c == nil {
		c = &counter{}
		sh.m[key] = c
	}
	for i := range c.at {
		if now-c.at[i] < WindowSlices {
			before += int(c.n[i])
		}
	}
	i := now % WindowSlices
	if c.at[i] != now {
		c.at[i], c.n[i] = now, 0
	}
	c.n[i]++
	if user == "" {
		return before, 0
	}
	if c.users == nil {
		c.users = map[string]int64{}
	}
	if _, ok := c.users[user]; !ok && len(c.users) >= maxUsers {
		for u, at := range c.users {
			if now-at >= WindowSlices {
				delete(c.users, u)
			}
		}
	}
	if _, ok := c.users[user]; ok || len(c.users) < maxUsers {
		c.users[user] = now
	}
	for _, at := range c.users {
		if now-at < WindowSlices {
			users++
		}
	}
	return before, users
}

func (c *counter) latest() int64 {
	latest := c.at[0]
	for _, at := range c.at[1:] {
		latest = max(latest, at)
	}
	return latest
}

// userState is what the memory windows keep of one user: the last clicks and challenge solve.
type userState struct {
	clicks   [MaxClicks]int64 // unix nanoseconds, a ring
	next     int
	solve    time.Duration
	solvedAt int64 // the slice
}

func (w *memoryWindows) user(id string, now int64, do func(u *userState)) {
	sh := &w.users[shardOf(id)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.m == nil || len(sh.m) >= w.maxKeys && now-sh.swept < WindowSlices {
		sh.m = map[string]*userState{}
		sh.swept = now
	}
	if now-sh.swept >= WindowSlices {
		for id, u := range sh.m {
			last := u.clicks[(u.next+len(u.clicks)-1)%len(u.clicks)]
			if now-w.sliceOfNanos(last) >= WindowSlices && now-u.solvedAt >= WindowSlices {
				delete(sh.m, id)
			}
		}
		sh.swept = now
	}
	u := sh.m[id]
	if u == nil {
		u = &userState{solvedAt: math.MinInt64 / 2}
		sh.m[id] = u
	}
	do(u)
}
