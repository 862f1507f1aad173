package risk

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// The model's features: what the product page says of the click (Page, sent in the grab's
// body), and what this node has seen around the request, in a sliding window: the requests and
// distinct users of its client address and of its device fingerprint, the same page signals
// seen again (a replay), the user's click cadence and last captcha solve time, whether the
// address is a datacenter's or a proxy's (Networks), and the account claims of the identity
// provider's token. Each is a number, so that a model file names the ones it weighs.

// Page is what the product page measured of the pointer or touch movement before the click,
// and its device fingerprint: a hint (a hash of what the browser tells any page), not an identity.
type Page struct {
	Moves            int     // pointer or touch move events between the page's load and the click
	PathPx           float64 // their path's length, in CSS pixels
	DirectionEntropy float64 // Shannon entropy (bits) of the turns between moves, in 8 sectors: 0 to 3
	SpeedCV          float64 // the spread of the moves' speed over its mean
	Touch            bool    // the moves were a finger's
	LoadToClick      time.Duration
	Fingerprint      string // hex, 16 to 64 digits; "" when the page could not compute one
}

// The bounds a page's signals must keep: a page that sends more sends garbage.
const (
	MaxMoves       = 1_000_000
	MaxPathPx      = 1e8
	MaxSpeedCV     = 1e3
	MaxLoadToClick = 24 * time.Hour
)

// Check reports whether the signals are ones a page can measure.
func (p Page) Check() error {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case p.Moves < 0 || p.Moves > MaxMoves:
		return fmt.Errorf("moves %d: want 0 to %d", p.Moves, MaxMoves)
	case !finite(p.PathPx) || p.PathPx < 0 || p.PathPx > MaxPathPx:
		return fmt.Errorf("path_px %g: want 0 to %g", p.PathPx, MaxPathPx)
	case !finite(p.DirectionEntropy) || p.DirectionEntropy < 0 || p.DirectionEntropy > 3:
		return fmt.Errorf("direction_entropy %g: want 0 to 3 bits", p.DirectionEntropy)
	case !finite(p.SpeedCV) || p.SpeedCV < 0 || p.SpeedCV > MaxSpeedCV:
		return fmt.Errorf("speed_cv %g: want 0 to %g", p.SpeedCV, MaxSpeedCV)
	case p.LoadToClick < 0 || p.LoadToClick > MaxLoadToClick:
		return fmt.Errorf("load_to_click_ms %d: want 0 to %d", p.LoadToClick.Milliseconds(), MaxLoadToClick.Milliseconds())
	case p.Moves == 0 && p.PathPx > 0:
		return errors.New("a path without moves")
	}
	if f := p.Fingerprint; f != "" {
		if len(f) < 16 || len(f) > 64 {
			return fmt.Errorf("fingerprint of %d digits: want 16 to 64 hex digits", len(f))
		}
		for i := 0; i < len(f); i++ {
			if c := f[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return errors.New("fingerprint: want lowercase hex digits")
			}
		}
	}
	return nil
}

// digest identifies the exact signals: a page measures a new path every time, so the same
// digest from another click is a replay.
func (p Page) digest() string {
	var b [8 * 6]byte
	binary.LittleEndian.PutUint64(b[0:], uint64(p.Moves))
	binary.LittleEndian.PutUint64(b[8:], math.Float64bits(p.PathPx))
	binary.LittleEndian.PutUint64(b[16:], math.Float64bits(p.DirectionEntropy))
	binary.LittleEndian.PutUint64(b[24:], math.Float64bits(p.SpeedCV))
	binary.LittleEndian.PutUint64(b[32:], uint64(p.LoadToClick))
	if p.Touch {
		b[40] = 1
	}
	h := sha256.Sum256(b[:])
	return string(h[:12])
}

// Claims are what the identity provider's token says of the account, when it says it.
type Claims struct {
	Known      bool          // the token carried at least one of the configured claims
	AccountAge time.Duration // since the account was created; 0 when not said
	Trust      float64       // the provider's trust level, as it scales it; 0 when not said
}

// The features, by index into a Vector.
const (
	FeaturePage             = iota // 1 when the grab carried the page's signals
	FeatureMoves                   // log(1 + moves)
	FeaturePath                    // log(1 + path in pixels)
	FeatureDirectionEntropy        // bits
	FeatureSpeedCV                 // min(speed spread / mean, 10)
	FeatureTouch                   // 1 for a finger
	FeatureLoadToClick             // log(1 + seconds from the page's load to the click)
	FeatureFingerprint             // 1 when the page sent a fingerprint
	FeatureIPRequests              // log(1 + the address's requests in the window, this one included)
	FeatureIPUsers                 // log(1 + the address's distinct users in the window)
	FeatureFPRequests              // log(1 + the fingerprint's requests in the window)
	FeatureFPUsers                 // log(1 + the fingerprint's distinct users in the window)
	FeatureReplays                 // log(1 + the times these exact signals came before, in the window)
	FeatureUserClicks              // log(1 + the user's clicks in the window)
	FeatureCadence                 // 1 - the spread/mean of the user's last click intervals (1: a machine's beat), 0 before 3 clicks
	FeatureSolved                  // 1 when the user solved a challenge in the window
	FeatureSolveTime               // log(1 + seconds the last solve took); 0 without one
	FeatureDatacenter              // 1 when the address is in SECKILL_RISK_NETWORKS
	FeatureClaims                  // 1 when the token carried account claims
	FeatureAccountAge              // log(1 + the account's age in days)
	FeatureTrust                   // the provider's trust level
	NumFeatures
)

// FeatureNames are the features' names, as model files and recordings spell them.
var FeatureNames = [NumFeatures]string{
	"page_signals", "pointer_moves", "pointer_path", "direction_entropy", "speed_cv", "touch",
	"load_to_click", "fingerprint", "ip_requests", "ip_users", "fp_requests", "fp_users",
	"signal_replays", "user_clicks", "cadence", "solved", "solve_time", "datacenter",
	"claims", "account_age", "trust",
}

// FeatureIndex returns the index of the feature named name.
func FeatureIndex(name string) (int, bool) {
	for i, n := range FeatureNames {
		if n == name {
			return i, true
		}
	}
	return 0, false
}

// Vector is one request's features, indexed by the Feature constants.
type Vector [NumFeatures]float64

// Map returns the features by name, for a recording.
func (v *Vector) Map() map[string]float64 {
	m := make(map[string]float64, NumFeatures)
	for i, x := range v {
		m[FeatureNames[i]] = x
	}
	return m
}

// Features keeps what the features need of the requests this node has seen, bounded in memory,
// and computes them. Its zero value is not usable: call NewFeatures.
type Features struct {
	window   time.Duration
	networks *Networks // nil: no address is a datacenter's
	maxKeys  int       // per shard and kind: maxShardKeys

	addrs, prints, replays keyed
	users                  [shards]struct {
		mu    sync.Mutex
		m     map[string]*userState
		swept int64
	}
}

// The window is kept in slices: a count is of the slices still inside it.
const (
	windowSlices = 6
	maxKeyUsers  = 64     // distinct users remembered per address or fingerprint: beyond, it saturates
	maxShardKeys = 16_384 // keys per shard before the shard forgets everything (a flood of new keys)
)

// DefaultWindow is the sliding window of the counts.
const DefaultWindow = time.Minute

// NewFeatures returns the feature keeper over window (DefaultWindow if zero), looking addresses
// up in networks (which may be nil).
func NewFeatures(window time.Duration, networks *Networks) *Features {
	if window <= 0 {
		window = DefaultWindow
	}
	return &Features{window: window, networks: networks, maxKeys: maxShardKeys}
}

// Networks returns the datacenter and proxy networks the features look addresses up in.
func (f *Features) Networks() *Networks { return f.networks }

// slice is the number of the window's slice t falls in.
func (f *Features) slice(t time.Time) int64 { return t.UnixNano() / int64(f.window/windowSlices) }

// keyed counts the requests and distinct users per key over the window.
type keyed [shards]struct {
	mu    sync.Mutex
	m     map[string]*counter
	swept int64
}

type counter struct {
	at    [windowSlices]int64 // the slice each count is of
	n     [windowSlices]uint32
	users map[string]int64 // user -> the slice last seen in
}

// add counts a request of user (may be "") under key at slice now, and returns the requests
// before this one and the distinct users, this one's included, of the window.
func (k *keyed) add(key, user string, now int64, maxKeys int) (before, users int) {
	sh := &k[shardOf(key)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.m == nil || len(sh.m) >= maxKeys && now-sh.swept < windowSlices {
		sh.m = map[string]*counter{} // bounded: a flood of new keys forgets the shard
		sh.swept = now
	}
	if now-sh.swept >= windowSlices { // forget the keys the window has left behind
		for key, c := range sh.m {
			if now-c.latest() >= windowSlices {
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
		if now-c.at[i] < windowSlices {
			before += int(c.n[i])
		}
	}
	i := now % windowSlices
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
	if _, ok := c.users[user]; !ok && len(c.users) >= maxKeyUsers {
		for u, at := range c.users {
			if now-at >= windowSlices {
				delete(c.users, u)
			}
		}
	}
	if _, ok := c.users[user]; ok || len(c.users) < maxKeyUsers {
		c.users[user] = now
	}
	for _, at := range c.users {
		if now-at < windowSlices {
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

// userState is what the features keep of one user: the last clicks and challenge solve.
type userState struct {
	clicks   [8]int64 // unix nanoseconds, a ring
	next     int
	solve    time.Duration
	solvedAt int64 // the slice
}

func (f *Features) user(id string, now int64, do func(u *userState)) {
	sh := &f.users[shardOf(id)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.m == nil || len(sh.m) >= f.maxKeys && now-sh.swept < windowSlices {
		sh.m = map[string]*userState{}
		sh.swept = now
	}
	if now-sh.swept >= windowSlices {
		for id, u := range sh.m {
			if now-f.sliceOfNanos(u.clicks[(u.next+len(u.clicks)-1)%len(u.clicks)]) >= windowSlices && now-u.solvedAt >= windowSlices {
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

func (f *Features) sliceOfNanos(ns int64) int64 { return ns / int64(f.window/windowSlices) }

// Solved records that user solved a challenge in solve, at.
func (f *Features) Solved(user string, solve time.Duration, at time.Time) {
	f.user(user, f.slice(at), func(u *userState) { u.solve, u.solvedAt = solve, f.slice(at) })
}

// Grab counts the grab s and returns its features.
func (f *Features) Grab(s Signal) Vector {
	var v Vector
	now := f.slice(s.At)
	if p := s.Page; p != nil {
		v[FeaturePage] = 1
		v[FeatureMoves] = math.Log1p(float64(p.Moves))
		v[FeaturePath] = math.Log1p(p.PathPx)
		v[FeatureDirectionEntropy] = p.DirectionEntropy
		v[FeatureSpeedCV] = math.Min(p.SpeedCV, 10)
		if p.Touch {
			v[FeatureTouch] = 1
		}
		v[FeatureLoadToClick] = math.Log1p(p.LoadToClick.Seconds())
		if p.Fingerprint != "" {
			v[FeatureFingerprint] = 1
			n, users := f.prints.add(p.Fingerprint, s.User, now, f.maxKeys)
			v[FeatureFPRequests], v[FeatureFPUsers] = math.Log1p(float64(n+1)), math.Log1p(float64(users))
		}
		if p.Moves > 0 { // a page that saw no movement sends the same zeros every time
			n, _ := f.replays.add(p.digest(), "", now, f.maxKeys)
			v[FeatureReplays] = math.Log1p(float64(n))
		}
	}
	if s.IP.IsValid() {
		n, users := f.addrs.add(s.IP.String(), s.User, now, f.maxKeys)
		v[FeatureIPRequests], v[FeatureIPUsers] = math.Log1p(float64(n+1)), math.Log1p(float64(users))
		if f.networks != nil && f.networks.Contains(s.IP) {
			v[FeatureDatacenter] = 1
		}
	}
	if s.User != "" {
		at := s.At.UnixNano()
		f.user(s.User, now, func(u *userState) {
			u.clicks[u.next] = at
			u.next = (u.next + 1) % len(u.clicks)
			clicks, cadence := beatOf(u, f.sliceOfNanos, now)
			v[FeatureUserClicks], v[FeatureCadence] = math.Log1p(float64(clicks)), cadence
			if now-u.solvedAt < windowSlices {
				v[FeatureSolved], v[FeatureSolveTime] = 1, math.Log1p(u.solve.Seconds())
			}
		})
	}
	if c := s.Claims; c.Known {
		v[FeatureClaims] = 1
		v[FeatureAccountAge] = math.Log1p(c.AccountAge.Hours() / 24)
		v[FeatureTrust] = c.Trust
	}
	return v
}

// beatOf returns the user's clicks in the window and how regular their intervals are: 1 minus
// their spread over their mean, floored at 0, over at least 3 clicks (0 with fewer).
func beatOf(u *userState, sliceOf func(int64) int64, now int64) (clicks int, cadence float64) {
	n := len(u.clicks)
	var sum, sumSq float64
	intervals := 0
	for i := 0; i < n; i++ { // newest first
		cur := u.clicks[(u.next-1-i+2*n)%n]
		if cur == 0 || now-sliceOf(cur) >= windowSlices {
			break
		}
		clicks++
		if i == 0 {
			continue
		}
		next := u.clicks[(u.next-i+2*n)%n]
		d := float64(next - cur)
		sum += d
		sumSq += d * d
		intervals++
	}
	if intervals < 2 {
		return clicks, 0
	}
	mean := sum / float64(intervals)
	if mean <= 0 {
		return clicks, 1
	}
	sd := math.Sqrt(math.Max(sumSq/float64(intervals)-mean*mean, 0))
	return clicks, math.Max(0, 1-sd/mean)
}
