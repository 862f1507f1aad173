package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill/internal/httpapi"
	"seckill/internal/ratelimit"
	"seckill/internal/saletest"
)

const bigItem = `{"name":"Phone","kind":"item","stock":1000,"price_cents":100,"start_at":"2001-11-30T11:00:00Z","end_at":"2001-11-30T13:00:00Z"}`

// remaining is the activity's units left, from the admin stats.
func (f *fixture) remaining(id string) float64 {
	f.t.Helper()
	return f.do("GET", "/api/admin/activities/"+id+"/stats", adminToken, "").body["remaining"].(float64)
}

// TestUserRateLimit: a user's third grab within a second is 429 RATE_LIMITED with Retry-After,
// takes nothing, and does not slow anyone else; a second later the user is heard again.
func TestUserRateLimit(t *testing.T) {
	f := newFixtureWith(t, func(c *httpapi.Config, clock *saletest.Clock) {
		c.Limits = httpapi.Limits{PerUser: ratelimit.Rule{PerSecond: 2, Burst: 2}, Buckets: ratelimit.NewBuckets(clock.Now)}
	})
	id := f.create(bigItem)
	grab := func(user string) response { return f.do("POST", "/api/activities/"+id+"/grab", f.user(user), "") }
	if r := grab("alice"); r.status != http.StatusAccepted {
		t.Fatalf("first grab: %d %s", r.status, r.raw)
	}
	if r := grab("alice"); r.status != http.StatusConflict {
		t.Fatalf("second grab: %d %s", r.status, r.raw)
	}
	r := grab("alice")
	if r.status != http.StatusTooManyRequests || r.code() != "RATE_LIMITED" || r.header.Get("Retry-After") != "1" {
		t.Fatalf("third grab within the second: %d %s, Retry-After %q", r.status, r.raw, r.header.Get("Retry-After"))
	}
	if left := f.remaining(id); left != 999 {
		t.Fatalf("%v units left after one win and a refusal, want 999", left)
	}
	if r := grab("bob"); r.status != http.StatusAccepted {
		t.Fatalf("another user: %d %s", r.status, r.raw)
	}
	f.clock.Advance(time.Second)
	if r := grab("alice"); r.status != http.StatusConflict {
		t.Fatalf("a second later: %d %s, want the gate's answer again", r.status, r.raw)
	}
}

// TestIPRateLimit: from a peer that is not a trusted proxy, X-Forwarded-For is ignored, so a
// bot rotating it stays one client; from a trusted proxy the address it appended is the client.
func TestIPRateLimit(t *testing.T) {
	f := newFixtureWith(t, func(c *httpapi.Config, clock *saletest.Clock) {
		c.Limits = httpapi.Limits{PerIP: ratelimit.Rule{PerSecond: 3}, Windows: ratelimit.NewWindows(clock.Now)}
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	})
	id := f.create(bigItem)
	n := 0
	grab := func(peer, xff string) response {
		n++
		return f.doFrom(peer, "POST", "/api/activities/"+id+"/grab", f.user(fmt.Sprint("u", n)), "", "X-Forwarded-For", xff)
	}
	for i := range 3 {
		if r := grab("203.0.113.7:5000", fmt.Sprint("198.51.100.", i)); r.status != http.StatusAccepted {
			t.Fatalf("grab %d from a direct client: %d %s", i, r.status, r.raw)
		}
	}
	if r := grab("203.0.113.7:5001", "198.51.100.99"); r.status != http.StatusTooManyRequests {
		t.Fatalf("a fourth grab with yet another forged X-Forwarded-For: %d %s, want 429", r.status, r.raw)
	}
	for i := range 3 { // behind the proxy: the client it names, whatever the client wrote before it
		if r := grab("10.1.1.1:4000", fmt.Sprint("6.6.6.", i, ", 198.51.100.1")); r.status != http.StatusAccepted {
			t.Fatalf("grab %d through the proxy: %d %s", i, r.status, r.raw)
		}
	}
	if r := grab("10.1.1.1:4000", "7.7.7.7, 198.51.100.1"); r.status != http.StatusTooManyRequests {
		t.Fatalf("a fourth grab of one client through the proxy: %d %s, want 429", r.status, r.raw)
	}
	if r := grab("10.1.1.1:4000", "198.51.100.1, 198.51.100.2, 10.2.2.2"); r.status != http.StatusAccepted {
		t.Fatalf("another client behind two proxies: %d %s", r.status, r.raw)
	}
	if left := f.remaining(id); left != 1000-7 {
		t.Fatalf("%v units left, want %d: a refused grab takes nothing", left, 1000-7)
	}
	f.clock.Advance(2 * time.Second)
	if r := grab("203.0.113.7:5002", ""); r.status != http.StatusAccepted {
		t.Fatalf("the direct client two seconds later: %d %s", r.status, r.raw)
	}
}

// TestActivityRateLimit: the whole crowd of one activity shares a bucket; another activity has
// its own.
func TestActivityRateLimit(t *testing.T) {
	f := newFixtureWith(t, func(c *httpapi.Config, clock *saletest.Clock) {
		c.Limits = httpapi.Limits{PerActivity: ratelimit.Rule{PerSecond: 5, Burst: 5}, Buckets: ratelimit.NewBuckets(clock.Now)}
	})
	a, b := f.create(bigItem), f.create(bigItem)
	statuses := map[int]int{}
	for i := range 8 {
		statuses[f.do("POST", "/api/activities/"+a+"/grab", f.user(fmt.Sprint("u", i)), "").status]++
	}
	if statuses[http.StatusAccepted] != 5 || statuses[http.StatusTooManyRequests] != 3 {
		t.Fatalf("8 users at once on a limit of 5/s: %v", statuses)
	}
	if r := f.do("POST", "/api/activities/"+b+"/grab", f.user("u0"), ""); r.status != http.StatusAccepted {
		t.Fatalf("the other activity: %d %s", r.status, r.raw)
	}
}

// TestNodeRateLimit: the node's own bucket per activity refuses in memory, before the limits kept
// on Redis are asked: with those down, the grabs it refuses are 429, not BUSY.
func TestNodeRateLimit(t *testing.T) {
	seen := &outcomes{}
	f := newFixtureWith(t, func(c *httpapi.Config, clock *saletest.Clock) {
		c.Observe = seen
		c.Limits = httpapi.Limits{PerNode: ratelimit.Rule{PerSecond: 3, Burst: 3}, Local: ratelimit.NewBuckets(clock.Now),
			PerUser: ratelimit.Rule{PerSecond: 5, Burst: 5}, Buckets: failing{}}
	})
	a, b := f.create(bigItem), f.create(bigItem)
	statuses := map[int]int{}
	for i := range 8 {
		statuses[f.do("POST", "/api/activities/"+a+"/grab", f.user(fmt.Sprint("u", i)), "").status]++
	}
	if statuses[http.StatusServiceUnavailable] != 3 || statuses[http.StatusTooManyRequests] != 5 {
		t.Fatalf("8 users at once on a node limit of 3/s, the shared limits down: %v; want 3 BUSY (past the node's bucket) and 5 refused by it", statuses)
	}
	if r := f.do("POST", "/api/activities/"+b+"/grab", f.user("u0"), ""); r.status != http.StatusServiceUnavailable {
		t.Fatalf("the other activity has a bucket of its own: %d %s", r.status, r.raw)
	}
	if n := strings.Count(strings.Join(seen.seen, " "), "rate_limited_node"); n != 5 {
		t.Fatalf("outcomes %v: want 5 rate_limited_node", seen.seen)
	}
	if left := f.remaining(a); left != 1000 {
		t.Fatalf("%v units left, want 1000", left)
	}
}

// failing is a limiter whose store is down.
type failing struct{}

func (failing) Allow(context.Context, string, ratelimit.Rule) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, errors.New("redis: connection refused")
}

// TestLimiterDownIsBusy: a limit that cannot be checked fails closed: 503 BUSY, nothing taken.
func TestLimiterDownIsBusy(t *testing.T) {
	f := newFixtureWith(t, func(c *httpapi.Config, _ *saletest.Clock) {
		c.Limits = httpapi.Limits{PerUser: ratelimit.Rule{PerSecond: 5, Burst: 5}, Buckets: failing{}}
	})
	id := f.create(bigItem)
	r := f.do("POST", "/api/activities/"+id+"/grab", f.user("alice"), "")
	if r.status != http.StatusServiceUnavailable || r.code() != "BUSY" {
		t.Fatalf("grab with the limiter down: %d %s", r.status, r.raw)
	}
	if left := f.remaining(id); left != 1000 {
		t.Fatalf("%v units left, want 1000", left)
	}
}

// outcomes records what the grab endpoint reports to the metrics.
type outcomes struct {
	mu   sync.Mutex
	seen []string
}

func (o *outcomes) Grab(outcome string, d time.Duration) {
	o.mu.Lock()
	o.seen = append(o.seen, outcome)
	o.mu.Unlock()
}

func (o *outcomes) Challenge(outcome string) { o.Grab("challenge:"+outcome, 0) }

// TestGrabOutcomesAreObserved: every grab is reported once, named by where it was decided.
func TestGrabOutcomesAreObserved(t *testing.T) {
	seen := &outcomes{}
	f := newFixtureWith(t, func(c *httpapi.Config, clock *saletest.Clock) {
		c.Observe = seen
		c.Limits = httpapi.Limits{PerUser: ratelimit.Rule{PerSecond: 1, Burst: 1}, Buckets: ratelimit.NewBuckets(clock.Now)}
	})
	one := f.create(strings.Replace(validItem, `"stock":2`, `"stock":1`, 1))
	other := f.create(bigItem)
	grab := func(id, bearer string) { f.do("POST", "/api/activities/"+id+"/grab", bearer, "") }
	grab(one, f.user("alice"))   // won
	grab(one, f.user("bob"))     // the gate: sold out
	grab(one, f.user("carol"))   // the flag: sold out at the edge
	grab(other, f.user("alice")) // alice's second grab within the second
	grab(other, "not-a-token")
	f.clock.Advance(time.Second)
	grab(other, f.user("alice")) // won: the refused grab took nothing
	grab(other, f.user("dave"))
	f.clock.Advance(time.Second)
	grab(other, f.user("alice")) // already bought (limit 1 per user)
	want := []string{"won", "sold_out", "sold_out_edge", "rate_limited_user", "unauthorized", "won", "won", "already_bought"}
	if strings.Join(seen.seen, " ") != strings.Join(want, " ") {
		t.Fatalf("observed %v, want %v", seen.seen, want)
	}
}

// TestActivityRateLimits: an activity's own limits override the node's, each on its own, and 0
// switches one off; bad values are refused.
func TestActivityRateLimits(t *testing.T) {
	f := newFixtureWith(t, func(c *httpapi.Config, clock *saletest.Clock) {
		c.Limits = httpapi.Limits{PerUser: ratelimit.Rule{PerSecond: 5, Burst: 5},
			PerActivity: ratelimit.Rule{PerSecond: 3, Burst: 3}, Buckets: ratelimit.NewBuckets(clock.Now)}
	})
	withLimits := func(limits string) string {
		return f.create(strings.Replace(bigItem, `"stock":1000`, `"stock":1000,"per_user_limit":10,"rate_limits":`+limits, 1))
	}
	slow, open, plain := withLimits(`{"per_user":1}`), withLimits(`{"global":0,"per_user":100}`), f.create(bigItem)
	codes := func(id string, users ...string) string {
		var out []string
		for _, u := range users {
			r := f.do("POST", "/api/activities/"+id+"/grab", f.user(u), "")
			out = append(out, fmt.Sprint(r.status))
		}
		return strings.Join(out, " ")
	}
	if got := codes(slow, "alice", "alice", "bob"); got != "202 429 202" {
		t.Errorf("one grab a second per user: %s", got)
	}
	if got := codes(open, "a", "b", "c", "d", "e", "a", "a", "a", "a", "a", "a"); got != "202 202 202 202 202 202 202 202 202 202 202" {
		t.Errorf("the activity's limit off and the user's raised: %s", got)
	}
	if got := codes(plain, "p", "q", "r", "s"); got != "202 202 202 429" {
		t.Errorf("the node's activity limit of 3 a second: %s", got)
	}
	for _, bad := range []string{`{"per_user":-1}`, `{"global":1000001}`, `{"per_ip":"5"}`, `{"burst":5}`, `[]`} {
		body := strings.Replace(bigItem, `"stock":1000`, `"stock":1000,"rate_limits":`+bad, 1)
		if r := f.do("POST", "/api/admin/activities", adminToken, body); r.status != http.StatusBadRequest || r.code() != "INVALID_ARGUMENT" {
			t.Errorf("rate_limits %s: %d %s, want 400 INVALID_ARGUMENT", bad, r.status, r.raw)
		}
	}
}
