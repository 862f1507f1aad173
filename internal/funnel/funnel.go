// Package live keeps what the admin dashboard shows of one node's grab endpoint, per activity:
// how many grabs ended at each stage of the funnel since the node started, and for each of the
// last Window seconds the requests, the wins and the latency percentiles. It lives in memory;
// a node that restarts starts again from zero (Prometheus keeps the long view).
package funnel

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// Stage is where a grab's journey ended.
type Stage int

// The stages, in funnel order: refused at the edge (rate limited, blocked, challenged), turned
// away by the stock (sold out, already bought), failed (busy, other), or won.
const (
	RateLimited Stage = iota
	Blocked
	Challenged
	SoldOut
	AlreadyBought
	Busy
	Other
	Won
	stages
)

var stageNames = [stages]string{"rate_limited", "blocked", "challenged", "sold_out", "already_bought", "busy", "other", "won"}

func (s Stage) String() string {
	if s < 0 || s >= stages {
		return "other"
	}
	return stageNames[s]
}

// Window is how many seconds of history a Tracker keeps per activity.
const Window = 60

// MaxActivities bounds the activities a Tracker follows; grabs for more are not recorded. The
// caller records only activities it knows, so this is a backstop, not a policy.
const MaxActivities = 10_000

// Tracker records grabs. It is safe for concurrent use.
type Tracker struct {
	now  func() time.Time
	acts sync.Map // activity id -> *series
	n    atomic.Int64
}

// New returns a Tracker reading the clock now (time.Now outside tests).
func New(now func() time.Time) *Tracker {
	return &Tracker{now: now}
}

// series is one activity's record: totals since the start and a ring of seconds.
type series struct {
	mu     sync.Mutex
	totals [stages]int64
	ring   [Window]second
}

// second is one second of grabs: counts per stage and a latency histogram.
type second struct {
	unix   int64
	counts [stages]int64
	lat    [buckets]uint32
}

// Record counts one grab for activity that ended at stage after d.
func (t *Tracker) Record(activity string, stage Stage, d time.Duration) {
	if stage < 0 || stage >= stages {
		stage = Other
	}
	s := t.series(activity)
	if s == nil {
		return
	}
	now := t.now().Unix()
	b := bucketOf(d)
	s.mu.Lock()
	sec := &s.ring[now%Window]
	if sec.unix != now {
		*sec = second{unix: now}
	}
	sec.counts[stage]++
	sec.lat[b]++
	s.totals[stage]++
	s.mu.Unlock()
}

func (t *Tracker) series(activity string) *series {
	if v, ok := t.acts.Load(activity); ok {
		return v.(*series)
	}
	if t.n.Load() >= MaxActivities {
		return nil
	}
	v, loaded := t.acts.LoadOrStore(activity, new(series))
	if !loaded {
		t.n.Add(1)
	}
	return v.(*series)
}

// View is an activity's record as the dashboard draws it.
type View struct {
	// Totals counts grabs per stage (by Stage.String) since the node started.
	Totals map[string]int64 `json:"totals"`
	// Seconds are the last Window whole seconds, oldest first, the current one excluded; a
	// second without grabs is there with zero counts.
	Seconds []Point `json:"seconds"`
}

// Point is one second of grabs.
type Point struct {
	Unix     int64 `json:"t"`
	Requests int64 `json:"requests"`
	Won      int64 `json:"won"`
	// P50 and P99 are latency percentiles in microseconds, rounded up to their histogram
	// bucket's upper bound (at most 25 % above the true value); zero when there were no requests.
	P50 int64 `json:"p50_us"`
	P99 int64 `json:"p99_us"`
}

// View returns activity's record as of now.
func (t *Tracker) View(activity string) View {
	v := View{Totals: make(map[string]int64, stages), Seconds: make([]Point, 0, Window)}
	for st := range stages {
		v.Totals[st.String()] = 0
	}
	now := t.now().Unix()
	raw, ok := t.acts.Load(activity)
	if !ok {
		for u := now - Window; u < now; u++ {
			v.Seconds = append(v.Seconds, Point{Unix: u})
		}
		return v
	}
	s := raw.(*series)
	var ring [Window]second
	s.mu.Lock()
	totals := s.totals
	ring = s.ring
	s.mu.Unlock()
	for st := range stages {
		v.Totals[st.String()] = totals[st]
	}
	for u := now - Window; u < now; u++ {
		p := Point{Unix: u}
		if sec := &ring[((u%Window)+Window)%Window]; sec.unix == u {
			for _, n := range sec.counts {
				p.Requests += n
			}
			p.Won = sec.counts[Won]
			p.P50, p.P99 = quantile(&sec.lat, p.Requests, 0.50), quantile(&sec.lat, p.Requests, 0.99)
		}
		v.Seconds = append(v.Seconds, p)
	}
	return v
}

// The latency histogram is log-linear over microseconds: values below 2^sub each have a bucket,
// and every octave above is split into 2^sub buckets, up to about 67 s; anything slower lands
// in the last bucket.
const (
	sub     = 2
	octaves = 27
	buckets = (octaves-sub+1)<<sub + 1
)

func bucketOf(d time.Duration) int {
	us := uint64(max(d.Microseconds(), 0))
	if us < 1<<sub {
		return int(us)
	}
	e := bits.Len64(us) // us in [2^(e-1), 2^e)
	if e > octaves {
		return buckets - 1
	}
	m := us >> (e - 1 - sub) & (1<<sub - 1) // the sub-bucket within the octave
	return (e-sub)<<sub + int(m)
}

// upper is the largest value, in microseconds, that falls in bucket b.
func upper(b int) int64 {
	if b < 1<<sub {
		return int64(b)
	}
	if b >= buckets-1 {
		return 1<<octaves - 1
	}
	e, m := b>>sub+sub, int64(b&(1<<sub-1)) // e as in bucketOf
	width := int64(1) << (e - 1 - sub)
	return int64(1)<<(e-1) + (m+1)*width - 1
}

// quantile returns the upper bound of the bucket holding the q-quantile of n values.
func quantile(h *[buckets]uint32, n int64, q float64) int64 {
	if n == 0 {
		return 0
	}
	rank := min(max(int64(math.Ceil(q*float64(n))), 1), n)
	var seen int64
	for b, c := range h {
		seen += int64(c)
		if seen >= rank {
			return upper(b)
		}
	}
	return upper(buckets - 1)
}
