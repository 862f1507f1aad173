package risk

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// The model's features: what the product page says of the click (Page, sent in the grab's
// body), and what the nodes have seen around the request, in a sliding window (Windows): the
// requests and distinct users of its client address and of its device fingerprint, the same
// page signals seen again (a replay), the user's click cadence and last captcha solve time,
// whether the address is a datacenter's or a proxy's (Networks), and the account claims of the
// identity provider's token. Each is a number, so that a model file names the ones it weighs.

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

// Features computes the features of a grab from its signals and the windows' counts. By itself
// it keeps the windows in this process (a node's own); an engine with windows shared by the
// nodes (Options.Windows) counts there and gives it the counts. Its zero value is not usable:
// call NewFeatures.
type Features struct {
	networks *Networks // nil: no address is a datacenter's
	windows  *memoryWindows
}

// DefaultWindow is the sliding window of the counts.
const DefaultWindow = time.Minute

// NewFeatures returns the feature keeper over window (DefaultWindow if zero), looking addresses
// up in networks (which may be nil).
func NewFeatures(window time.Duration, networks *Networks) *Features {
	return &Features{networks: networks, windows: newMemoryWindows(window)}
}

// Networks returns the datacenter and proxy networks the features look addresses up in.
func (f *Features) Networks() *Networks { return f.networks }

// Solved records that user solved a challenge in solve, at, in this process's windows.
func (f *Features) Solved(user string, solve time.Duration, at time.Time) {
	f.windows.Solved(context.Background(), user, solve, at)
}

// Grab counts the grab s in this process's windows and returns its features.
func (f *Features) Grab(s Signal) Vector {
	seen := f.windows.count(keysOf(s, true), s.At)
	return f.vector(s, &seen)
}

// keysOf are the keys s is counted under: its address and user (and the user's clicks) and,
// with page, its page's fingerprint and signals (what only the features read).
func keysOf(s Signal, page bool) Keys {
	var k Keys
	if s.IP.IsValid() {
		k.IP = s.IP.String()
	}
	k.User, k.Clicks = s.User, s.User != ""
	if p := s.Page; p != nil && page {
		k.Fingerprint = p.Fingerprint
		if p.Moves > 0 { // a page that saw no movement sends the same zeros every time
			k.Replay = p.digest()
		}
	}
	return k
}

// vector computes the features of s from what the windows hold of it once it was counted.
func (f *Features) vector(s Signal, seen *Seen) Vector {
	var v Vector
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
			v[FeatureFPRequests], v[FeatureFPUsers] = math.Log1p(float64(seen.FPRequests+1)), logUsers(seen.FPUsers)
		}
		if p.Moves > 0 {
			v[FeatureReplays] = math.Log1p(float64(seen.Replays))
		}
	}
	if s.IP.IsValid() {
		v[FeatureIPRequests], v[FeatureIPUsers] = math.Log1p(float64(seen.IPRequests+1)), logUsers(seen.IPUsers)
		if f.networks != nil && f.networks.Contains(s.IP) {
			v[FeatureDatacenter] = 1
		}
	}
	if s.User != "" {
		clicks, cadence := beatOf(&seen.Clicks)
		v[FeatureUserClicks], v[FeatureCadence] = math.Log1p(float64(clicks)), cadence
		if seen.Solved {
			v[FeatureSolved], v[FeatureSolveTime] = 1, math.Log1p(seen.Solve.Seconds())
		}
	}
	if c := s.Claims; c.Known {
		v[FeatureClaims] = 1
		v[FeatureAccountAge] = math.Log1p(c.AccountAge.Hours() / 24)
		v[FeatureTrust] = c.Trust
	}
	return v
}

// logUsers is the feature of a count of distinct users: saturated at the 64 a node's memory
// remembers, which the models were trained on, whatever a shared store counts beyond.
func logUsers(n int) float64 { return math.Log1p(float64(min(n, maxKeyUsers))) }

// beatOf returns the user's clicks in the window (newest first, 0 past the last) and how regular
// their intervals are: 1 minus their spread over their mean, floored at 0, over at least 3 clicks
// (0 with fewer).
func beatOf(c *[MaxClicks]int64) (clicks int, cadence float64) {
	var sum, sumSq float64
	for i, at := range c {
		if at == 0 {
			break
		}
		clicks++
		if i == 0 {
			continue
		}
		d := float64(c[i-1] - at)
		sum += d
		sumSq += d * d
	}
	intervals := clicks - 1
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
