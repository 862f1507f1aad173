// Package risk scores the requests in front of a sale with pluggable rules and decides: allow,
// challenge (the grab must carry a solved challenge's one-time pass) or block (this request is
// refused). The rules here are the classic signals of scalping bots (OWASP OAT-005): many
// accounts behind one address, clicks at a machine's regular cadence, and challenges solved
// faster than a person reads them. By themselves they keep their state in this process,
// bounded in memory: one node judges the traffic it sees. A cluster's engine counts in windows
// shared by the nodes (Windows, windows.go; on Redis in the distributed mode), and the rules
// that count judge by those counts: a farm spread over the nodes is seen whole.
//
// A trained model (model.go: a logistic regression in a versioned JSON file) takes over from the
// rules when one is configured: it scores the features of features.go, which the product page's
// signals and the windows give, and the Engine (engine.go) acts on its score, or only counts it
// in shadow mode.
package risk

import (
	"hash/maphash"
	"net/netip"
	"sync"
	"time"
)

// Decision is what the rules make of a request.
type Decision int

// The decisions, in order of severity.
const (
	Allow Decision = iota
	Challenge
	Block
)

func (d Decision) String() string {
	switch d {
	case Allow:
		return "allow"
	case Challenge:
		return "challenge"
	default:
		return "block"
	}
}

// Signal is what a rule sees of one request.
type Signal struct {
	IP       netip.Addr
	User     string
	Activity string
	At       time.Time
	// Solve is how long the user took to answer a challenge; zero for a grab.
	Solve time.Duration
	// Page is what the product page measured of the click (nil: the grab carried nothing).
	Page *Page
	// Claims are what the identity provider's token says of the account.
	Claims Claims
	// Seen, when set, is what the windows shared by the nodes hold of this grab once counted
	// (the Engine sets it, see Options.Windows): the rules that count judge by it instead of
	// their own memory, which sees only this node's part of the crowd.
	Seen *Seen
}

// Rule judges requests. Grab sees every grab; Answer every right answer to a challenge. A rule
// that has no opinion allows.
type Rule interface {
	Name() string
	Grab(s Signal) Decision
	Answer(s Signal) Decision
}

// counts is implemented by the rules that count in windows (accounts per address, the cadence
// of a user's clicks): given the shared windows' counts (Signal.Seen), they judge by them, and
// say which windows they read, so that a grab is counted in those alone.
type counts interface{ reads() windowsRead }

// windowsRead are the windows a rule reads: the address's accounts (and how many of them it
// weighs at most), the user's clicks.
type windowsRead struct {
	ip, clicks bool
	users      int
}

// shards spreads a rule's state over locks, so the crowd rarely waits for itself.
const shards = 64

var seed = maphash.MakeSeed()

func shardOf(key string) int { return int(maphash.String(seed, key) % shards) }

// AccountsPerIP counts the distinct users seen grabbing from one client address within Window:
// beyond ChallengeAbove of them every grab from the address needs a challenge, and from BlockAt
// on it is blocked. Enable it only where clients reach the service directly: behind a NAT or a
// CDN many honest users share an address. Given the shared windows' counts (Signal.Seen), it
// counts the users of the address there, over their window, on every node at once.
type AccountsPerIP struct {
	ChallengeAbove, BlockAt int
	Window                  time.Duration

	shard [shards]struct {
		mu    sync.Mutex
		addrs map[netip.Addr]*accounts
		swept time.Time
	}
}

type accounts struct {
	seen map[string]time.Time // user -> last grab; at most BlockAt users are remembered
}

// Name implements Rule.
func (r *AccountsPerIP) Name() string { return "accounts_per_ip" }

// Answer implements Rule.
func (r *AccountsPerIP) Answer(Signal) Decision { return Allow }

func (r *AccountsPerIP) reads() windowsRead { return windowsRead{ip: true, users: r.BlockAt} }

func (r *AccountsPerIP) decide(n int) Decision {
	switch {
	case n >= r.BlockAt:
		return Block
	case n > r.ChallengeAbove:
		return Challenge
	}
	return Allow
}

// Grab implements Rule.
func (r *AccountsPerIP) Grab(s Signal) Decision {
	if !s.IP.IsValid() {
		return Allow
	}
	if s.Seen != nil {
		return r.decide(s.Seen.IPUsers)
	}
	sh := &r.shard[shardOf(s.IP.String())]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.addrs == nil {
		sh.addrs = map[netip.Addr]*accounts{}
	}
	if s.At.Sub(sh.swept) > r.Window { // forget what the window has left behind
		for ip, a := range sh.addrs {
			for u, at := range a.seen {
				if s.At.Sub(at) > r.Window {
					delete(a.seen, u)
				}
			}
			if len(a.seen) == 0 {
				delete(sh.addrs, ip)
			}
		}
		sh.swept = s.At
	}
	a := sh.addrs[s.IP]
	if a == nil {
		a = &accounts{seen: map[string]time.Time{}}
		sh.addrs[s.IP] = a
	}
	if len(a.seen) > r.ChallengeAbove { // a suspect: count only who is still in the window
		for u, at := range a.seen {
			if s.At.Sub(at) > r.Window {
				delete(a.seen, u)
			}
		}
	}
	if _, ok := a.seen[s.User]; ok || len(a.seen) < r.BlockAt {
		a.seen[s.User] = s.At
	}
	return r.decide(len(a.seen))
}

// Cadence challenges a user whose last Clicks grabs came at a machine's regular beat: intervals
// under Slowest on average whose spread (standard deviation) is under Jitter of their mean.
// People click irregularly; a script's timer does not. Given the shared windows' counts
// (Signal.Seen), it looks at the user's clicks there, on whichever nodes they came to (at most
// MaxClicks of them).
type Cadence struct {
	Clicks  int           // grabs looked at; 8 if zero
	Slowest time.Duration // mean interval above which nobody is suspected
	Jitter  float64       // spread / mean below which the beat is a machine's

	shard [shards]struct {
		mu    sync.Mutex
		users map[string]*beat
		swept time.Time
	}
}

type beat struct {
	at   []time.Time // ring of the last Clicks grab times
	next int
}

// Name implements Rule.
func (r *Cadence) Name() string { return "cadence" }

// Answer implements Rule.
func (r *Cadence) Answer(Signal) Decision { return Allow }

func (r *Cadence) reads() windowsRead { return windowsRead{clicks: true} }

// Grab implements Rule.
func (r *Cadence) Grab(s Signal) Decision {
	clicks := r.Clicks
	if clicks < 3 {
		clicks = 8
	}
	if s.Seen != nil && s.Seen.Clicks[0] != 0 { // the windows counted this click among the user's
		return r.sharedBeat(s.Seen.Clicks[:min(clicks, MaxClicks)])
	}
	sh := &r.shard[shardOf(s.User)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.users == nil {
		sh.users = map[string]*beat{}
	}
	if forget := time.Duration(clicks) * r.Slowest; s.At.Sub(sh.swept) > forget {
		for u, b := range sh.users {
			if s.At.Sub(b.at[(b.next+clicks-1)%clicks]) > forget {
				delete(sh.users, u)
			}
		}
		sh.swept = s.At
	}
	b := sh.users[s.User]
	if b == nil {
		b = &beat{at: make([]time.Time, clicks)}
		sh.users[s.User] = b
	}
	b.at[b.next] = s.At
	b.next = (b.next + 1) % clicks
	// Oldest to newest: the ring starts at next.
	var sum, sumSq float64
	for i := 1; i < clicks; i++ {
		prev, cur := b.at[(b.next+i-1)%clicks], b.at[(b.next+i)%clicks]
		if prev.IsZero() {
			return Allow // not enough clicks yet
		}
		d := float64(cur.Sub(prev))
		sum += d
		sumSq += d * d
	}
	return r.judge(sum, sumSq, clicks-1)
}

// sharedBeat judges the clicks of the shared windows (Unix nanoseconds, newest first), as Grab its own.
func (r *Cadence) sharedBeat(at []int64) Decision {
	var sum, sumSq float64
	for i := 1; i < len(at); i++ {
		if at[i] == 0 {
			return Allow // not enough clicks yet
		}
		d := float64(at[i-1] - at[i])
		sum += d
		sumSq += d * d
	}
	return r.judge(sum, sumSq, len(at)-1)
}

// judge decides on the sum and the sum of squares of intervals of a user's clicks.
func (r *Cadence) judge(sum, sumSq float64, intervals int) Decision {
	n := float64(intervals)
	mean := sum / n
	if mean <= 0 || mean > float64(r.Slowest) {
		return Allow
	}
	variance := sumSq/n - mean*mean
	if variance < 0 {
		variance = 0
	}
	if variance < (r.Jitter*mean)*(r.Jitter*mean) {
		return Challenge
	}
	return Allow
}

// SolveTime blocks a right answer given faster than a person reads the picture and types.
type SolveTime struct{ Fastest time.Duration }

// Name implements Rule.
func (r SolveTime) Name() string { return "solve_time" }

// Grab implements Rule.
func (r SolveTime) Grab(Signal) Decision { return Allow }

// Answer implements Rule.
func (r SolveTime) Answer(s Signal) Decision {
	if s.Solve < r.Fastest {
		return Block
	}
	return Allow
}
