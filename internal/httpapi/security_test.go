package httpapi_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"seckill/internal/auth"
	"seckill/internal/httpapi"
	"seckill/internal/ratelimit"
	"seckill/internal/risk"
	"seckill/internal/saletest"
)

// secureFixture serves the API with the production edge: a user limit of 5 grabs a second,
// the risk rules (20 accounts per IP, a 1 s fastest solve) and a trusted proxy at 10.0.0.0/8.
func secureFixture(t *testing.T) *fixture {
	return newFixtureWith(t, func(c *httpapi.Config, clock *saletest.Clock) {
		c.Limits = httpapi.Limits{PerUser: ratelimit.Rule{PerSecond: 5, Burst: 5}, Buckets: ratelimit.NewBuckets(clock.Now)}
		c.Risk = risk.New(&risk.AccountsPerIP{ChallengeAbove: 20, BlockAt: 100, Window: time.Minute},
			risk.SolveTime{Fastest: time.Second})
	})
}

// holdings is what the sale has written for an activity: units taken and order rows.
func (f *fixture) holdings(id string) string {
	f.t.Helper()
	c, err := f.store.Counts(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	rem, err := f.svc.Remaining(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return fmt.Sprintf("remaining %d, orders %d", rem, c.Orders)
}

// TestSecuritySuite sends what scalpers and attackers send. Every request is refused with its
// stable code and writes nothing.
func TestSecuritySuite(t *testing.T) {
	t.Run("replayed and foreign path tokens", func(t *testing.T) {
		f := secureFixture(t)
		id, other := f.create(guardedItem), f.create(guardedItem)
		alice, bob := f.user("alice"), f.user("bob")
		f.clock.Advance(2 * time.Second)
		r := f.solveSlowly(id, alice)
		path := r.body["grab_path"].(string)
		token := r.body["path_token"].(string)
		if r := f.do("POST", path, alice, ""); r.status != http.StatusAccepted {
			t.Fatalf("alice's own path: %d %s", r.status, r.raw)
		}
		f.drain(id) // alice's order is written: from here on nothing may change
		before, beforeOther := f.holdings(id), f.holdings(other)
		for name, req := range map[string][2]string{
			"replayed":           {path, alice},
			"another user's":     {path, bob},
			"another activity's": {"/api/activities/" + other + "/grab/" + token, alice},
			"made up":            {"/api/activities/" + id + "/grab/p" + strings.Repeat("a", 24), bob},
			"bare grab":          {"/api/activities/" + id + "/grab", bob},
		} {
			if r := f.do("POST", req[0], req[1], ""); r.status != http.StatusForbidden || r.code() != "CHALLENGE_REQUIRED" {
				t.Errorf("%s path token: %d %s, want 403 CHALLENGE_REQUIRED", name, r.status, r.raw)
			}
		}
		if after, afterOther := f.holdings(id), f.holdings(other); after != before || afterOther != beforeOther {
			t.Fatalf("refused grabs wrote: %s -> %s, %s -> %s", before, after, beforeOther, afterOther)
		}
	})

	t.Run("forged, alg none and expired tokens", func(t *testing.T) {
		f := secureFixture(t)
		id := f.create(bigItem)
		stranger, err := auth.New([]byte("another-secret-another-secret-32b"), f.clock.Now)
		if err != nil {
			t.Fatal(err)
		}
		forged, _ := stranger.Mint("alice", f.clock.Now(), time.Hour)
		expired, _ := f.tokens.Mint("alice", f.clock.Now().Add(-2*time.Hour), time.Hour)
		b64 := base64.RawURLEncoding.EncodeToString
		good := f.user("alice")
		parts := strings.Split(good, ".")
		none := b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
		hs512 := b64([]byte(`{"alg":"HS512","typ":"JWT"}`)) + "." + parts[1] + "." + parts[2]
		resigned := parts[0] + "." + b64([]byte(`{"sub":"bob","exp":9999999999}`)) + "." + parts[2]
		before := f.holdings(id)
		for name, bearer := range map[string]string{"forged": forged, "alg none": none, "alg swapped": hs512,
			"payload swapped": resigned, "expired": expired, "admin token": adminToken, "empty": ""} {
			if r := f.do("POST", "/api/activities/"+id+"/grab", bearer, ""); r.status != http.StatusUnauthorized || r.code() != "UNAUTHORIZED" {
				t.Errorf("%s token: %d %s, want 401 UNAUTHORIZED", name, r.status, r.raw)
			}
		}
		if after := f.holdings(id); after != before {
			t.Fatalf("refused grabs wrote: %s -> %s", before, after)
		}
	})

	t.Run("swapped user id", func(t *testing.T) {
		f := secureFixture(t)
		id := f.create(bigItem)
		alice, bob := f.user("alice"), f.user("bob")
		r := f.do("POST", "/api/activities/"+id+"/grab", bob, "")
		if r.status != http.StatusAccepted {
			t.Fatalf("bob's grab: %d %s", r.status, r.raw)
		}
		bobs := r.body["order_token"].(string)
		// The user is the token's subject, whatever else the request says.
		r = f.do("POST", "/api/activities/"+id+"/grab?user=bob", alice, "", "X-User-Id", "bob")
		if r.status != http.StatusAccepted {
			t.Fatalf("alice's grab naming bob: %d %s", r.status, r.raw)
		}
		f.drain(id)
		if o := f.do("GET", "/api/orders/"+r.body["order_token"].(string), alice, ""); o.body["status"] != "CREATED" {
			t.Fatalf("alice's order, as alice: %d %s", o.status, o.raw)
		}
		before := f.holdings(id)
		for _, path := range []string{"/api/orders/" + bobs, "/api/orders/" + bobs + "/pay", "/api/orders/" + bobs + "/cancel"} {
			method := "POST"
			if !strings.HasSuffix(path, "pay") && !strings.HasSuffix(path, "cancel") {
				method = "GET"
			}
			if r := f.do(method, path, alice, "", "X-User-Id", "bob"); r.status != http.StatusNotFound {
				t.Errorf("%s %s as alice: %d %s, want 404", method, path, r.status, r.raw)
			}
		}
		if o := f.do("GET", "/api/orders/"+bobs, bob, ""); o.body["status"] != "CREATED" {
			t.Fatalf("bob's order after alice's tries: %s", o.raw)
		}
		if after := f.holdings(id); after != before {
			t.Fatalf("refused requests wrote: %s -> %s", before, after)
		}
	})

	t.Run("rotating X-Forwarded-For from an untrusted peer", func(t *testing.T) {
		f := newFixtureWith(t, func(c *httpapi.Config, clock *saletest.Clock) {
			c.Limits = httpapi.Limits{PerIP: ratelimit.Rule{PerSecond: 3}, Windows: ratelimit.NewWindows(clock.Now)}
		})
		id := f.create(bigItem)
		won := 0
		for i := range 50 {
			r := f.doFrom("203.0.113.7:5000", "POST", "/api/activities/"+id+"/grab", f.user(fmt.Sprint("u", i)), "",
				"X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i))
			switch {
			case r.status == http.StatusAccepted:
				won++
			case r.status != http.StatusTooManyRequests || r.code() != "RATE_LIMITED":
				t.Fatalf("grab %d: %d %s", i, r.status, r.raw)
			}
		}
		if won != 3 {
			t.Fatalf("%d grabs passed a limit of 3 a second by rotating X-Forwarded-For", won)
		}
	})

	t.Run("1000 requests in a second from one user", func(t *testing.T) {
		f := secureFixture(t)
		id := f.create(bigItem)
		alice := f.user("alice")
		codes := map[string]int{}
		for range 1000 {
			r := f.do("POST", "/api/activities/"+id+"/grab", alice, "")
			codes[fmt.Sprint(r.status, r.code())]++
			if r.status == http.StatusTooManyRequests && r.header.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
		}
		want := map[string]int{"202": 1, "409ALREADY_BOUGHT": 4, "429RATE_LIMITED": 995}
		if fmt.Sprint(codes) != fmt.Sprint(want) {
			t.Fatalf("answers %v, want %v", codes, want)
		}
		if h := f.holdings(id); h != "remaining 999, orders 0" && h != "remaining 999, orders 1" {
			t.Fatalf("after the storm: %s, want exactly one unit taken", h)
		}
	})

	t.Run("100 accounts from one IP", func(t *testing.T) {
		f := secureFixture(t)
		id := f.create(bigItem)
		codes := map[string]int{}
		for i := range 100 {
			r := f.doFrom("203.0.113.50:4000", "POST", "/api/activities/"+id+"/grab", f.user(fmt.Sprint("farm-", i)), "")
			codes[fmt.Sprint(r.status, r.code())]++
		}
		want := map[string]int{"202": 20, "403CHALLENGE_REQUIRED": 79, "403BLOCKED": 1}
		if fmt.Sprint(codes) != fmt.Sprint(want) {
			t.Fatalf("answers %v, want %v", codes, want)
		}
		if r := f.doFrom("198.51.100.1:4000", "POST", "/api/activities/"+id+"/grab", f.user("neighbour"), ""); r.status != http.StatusAccepted {
			t.Fatalf("a user on another address: %d %s", r.status, r.raw)
		}
		if h := f.holdings(id); !strings.HasPrefix(h, "remaining 979,") {
			t.Fatalf("after the farm: %s, want 21 units taken", h)
		}
	})

	t.Run("a challenge solved faster than a person", func(t *testing.T) {
		f := secureFixture(t)
		id := f.create(guardedItem)
		alice := f.user("alice")
		if r := f.solve(id, alice, 0); r.status != http.StatusForbidden || r.code() != "CHALLENGE_FAILED" {
			t.Fatalf("an instant right answer: %d %s, want 403 CHALLENGE_FAILED", r.status, r.raw)
		}
		if r := f.solveSlowly(id, alice); r.status != http.StatusOK {
			t.Fatalf("an answer after 2 s: %d %s", r.status, r.raw)
		}
	})

	t.Run("bodies the routes without one do not take", func(t *testing.T) {
		f := newFixture(t, false) // no rate limits: every request reaches the body check
		id := f.create(bigItem)
		alice, bob := f.user("alice"), f.user("bob")
		r := f.do("POST", "/api/activities/"+id+"/grab", bob, "")
		if r.status != http.StatusAccepted {
			t.Fatalf("bob's grab: %d %s", r.status, r.raw)
		}
		order := r.body["order_token"].(string)
		f.drain(id)
		before := f.holdings(id)
		bad := map[string]string{
			"malformed":       `{not json`,
			"unknown field":   `{"quantity":2}`,
			"an array":        `[]`,
			"null":            `null`,
			"a string":        `"grab"`,
			"two objects":     `{} {}`,
			"trailing bytes":  `{}x`,
			"whitespace only": "  \n",
			"a form":          "quantity=2",
			"truncated":       `{"`,
			"over the limit":  `{"pad":"` + strings.Repeat("x", httpapi.MaxEmptyBody) + `"}`,
			"eight mebibytes": strings.Repeat("x", 8<<20),
		}
		for _, route := range []struct{ path, bearer string }{
			{"/api/activities/" + id + "/grab", alice},
			{"/api/activities/" + id + "/challenge", alice},
			{"/api/orders/" + order + "/pay", bob},
			{"/api/orders/" + order + "/cancel", bob},
			{"/api/admin/activities/" + id + "/reconcile", adminToken},
		} {
			for name, body := range bad {
				status, code := http.StatusBadRequest, "INVALID_ARGUMENT"
				if len(body) > httpapi.MaxEmptyBody {
					status, code = http.StatusRequestEntityTooLarge, "TOO_LARGE"
				}
				r := f.do("POST", route.path, route.bearer, body, "Idempotency-Key", "k-"+strings.ReplaceAll(name, " ", "-"))
				if r.status != status || r.code() != code {
					t.Errorf("%s with a body %s: %d %s, want %d %s", route.path, name, r.status, r.raw, status, code)
				}
			}
		}
		// The same, sent chunked (no Content-Length): the server reads what comes.
		req := httptest.NewRequest("POST", "/api/activities/"+id+"/grab", strings.NewReader(`{"quantity":2}`))
		req.ContentLength = -1
		req.Header.Set("Authorization", "Bearer "+alice)
		rec := httptest.NewRecorder()
		f.h.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"INVALID_ARGUMENT"`) {
			t.Errorf("a chunked unknown field: %d %s", rec.Code, rec.Body)
		}
		if after := f.holdings(id); after != before {
			t.Fatalf("refused bodies wrote: %s -> %s", before, after)
		}
		if o := f.do("GET", "/api/orders/"+order, bob, ""); o.body["status"] != "CREATED" {
			t.Fatalf("bob's order after refused pays and cancels: %s", o.raw)
		}
		// Nothing was remembered under the refused requests' keys: the key's first grab is the
		// next one, and an empty object is no body at all.
		r = f.do("POST", "/api/activities/"+id+"/grab", alice, " {} ", "Idempotency-Key", "k-malformed")
		if r.status != http.StatusAccepted {
			t.Fatalf("a grab with {} under a key a refused body used: %d %s", r.status, r.raw)
		}
		req = httptest.NewRequest("POST", "/api/activities/"+id+"/grab", strings.NewReader(""))
		req.ContentLength = -1
		req.Header.Set("Authorization", "Bearer "+f.user("carol"))
		rec = httptest.NewRecorder()
		f.h.ServeHTTP(rec, req)
		if rec.Code != http.StatusAccepted {
			t.Errorf("a chunked empty body: %d %s", rec.Code, rec.Body)
		}
		if h := f.holdings(id); !strings.HasPrefix(h, "remaining 997,") {
			t.Fatalf("after the accepted grabs: %s, want 3 units taken in all", h)
		}
	})

	t.Run("cross-origin browser POST", func(t *testing.T) {
		f := secureFixture(t)
		id := f.create(bigItem)
		alice := f.user("alice")
		before := f.holdings(id)
		for name, h := range map[string][]string{
			"fetch from another site": {"Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"},
			"an old browser's Origin": {"Origin", "https://evil.example"},
		} {
			r := f.do("POST", "/api/activities/"+id+"/grab", alice, "", h...)
			if r.status != http.StatusForbidden || r.code() != "FORBIDDEN" {
				t.Errorf("%s: %d %s, want 403 FORBIDDEN", name, r.status, r.raw)
			}
		}
		// A form post cannot carry the bearer token at all.
		if r := f.do("POST", "/api/activities/"+id+"/grab", "", "x=1", "Content-Type", "application/x-www-form-urlencoded"); r.status != http.StatusUnauthorized {
			t.Errorf("a form post: %d %s, want 401", r.status, r.raw)
		}
		// The preflight a script needs for a bearer header gets no CORS grant.
		r := f.do("OPTIONS", "/api/activities/"+id+"/grab", "", "", "Origin", "https://evil.example",
			"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization")
		if r.header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("the preflight was granted: %v", r.header)
		}
		if after := f.holdings(id); after != before {
			t.Fatalf("refused requests wrote: %s -> %s", before, after)
		}
		if r := f.do("POST", "/api/activities/"+id+"/grab", alice, "", "Sec-Fetch-Site", "same-origin"); r.status != http.StatusAccepted {
			t.Fatalf("a same-origin POST: %d %s", r.status, r.raw)
		}
	})
}

// solveSlowly asks for a challenge, lets 2 s pass on the service's clock, and answers it right.
func (f *fixture) solveSlowly(id, bearer string) response {
	f.t.Helper()
	c := f.do("POST", "/api/activities/"+id+"/challenge", bearer, "")
	if c.status != http.StatusCreated {
		f.t.Fatalf("challenge: %d %s", c.status, c.raw)
	}
	cid := c.body["challenge_id"].(string)
	f.clock.Advance(2 * time.Second)
	return f.do("POST", "/api/activities/"+id+"/challenge/answer", bearer,
		fmt.Sprintf(`{"challenge_id":%q,"answer":%d}`, cid, f.answers.Of(f.t, cid)))
}

// drain waits until the worker has placed every grab of id.
func (f *fixture) drain(id string) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if st := f.do("GET", "/api/admin/activities/"+id+"/stats", adminToken, ""); st.body["pending_queue"] == 0.0 {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatal("the queue did not drain in 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
