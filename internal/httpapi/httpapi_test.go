package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"seckill/internal/auth"
	"seckill/internal/httpapi"
	"seckill/internal/openapitest"
	"seckill/internal/sale"
	"seckill/internal/saletest"

	"seckill/internal/node"
	"seckill/internal/node/nodetest"
)

const adminToken = "admin-secret-for-tests"

var secret = []byte("0123456789abcdef0123456789abcdef")

type fixture struct {
	t       testing.TB
	h       http.Handler // srv, its exchanges checked against the OpenAPI document
	srv     *httpapi.Server
	svc     *sale.Service
	lines   *sale.Lines
	rsv     *sale.Reservations
	fc      *sale.Forecasts
	store   sale.Store
	tokens  *auth.Tokens
	clock   *saletest.Clock
	answers *saletest.Answers
}

// newFixture serves the API on the embedded wiring with a settable clock at saletest.T0 (2001-11-30
// 12:00 UTC): the dates of the bodies below are around it.
func newFixture(t testing.TB, devLogin bool) *fixture {
	return newFixtureWith(t, func(c *httpapi.Config, _ *saletest.Clock) { c.DevLogin = devLogin })
}

// newFixtureWith is newFixture with the server's configuration adjusted by set.
func newFixtureWith(t testing.TB, set func(c *httpapi.Config, clock *saletest.Clock)) *fixture {
	t.Helper()
	return newFixtureOn(t, "", set)
}

// newFixtureOn is newFixtureWith on the database dsn ("": SQLite in t's temp dir).
func newFixtureOn(t testing.TB, dsn string, set func(c *httpapi.Config, clock *saletest.Clock)) *fixture {
	t.Helper()
	return newFixtureEnv(t, dsn, func(c *httpapi.Config, env saletest.Env) { set(c, env.Clock) })
}

// newFixtureEnv is newFixtureOn with set given the node's environment (its store, its clock).
func newFixtureEnv(t testing.TB, dsn string, set func(c *httpapi.Config, env saletest.Env)) *fixture {
	t.Helper()
	clock := saletest.NewClock(saletest.T0)
	env := nodetest.Embedded(t, clock)
	if dsn != "" {
		env = nodetest.EmbeddedOn(t, clock, dsn)
	}
	tokens, err := auth.New(secret, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	c := httpapi.Config{Service: env.Service, Features: env.Features, Tokens: tokens, AdminToken: adminToken,
		Ready: env.Store.Ping, Log: slog.New(slog.DiscardHandler)}
	c.Payments = nil // the node of the binary has payments only with a provider: newProviderFixture's
	c.Plan = node.PlanForecast
	set(&c, env)
	srv := httpapi.New(c)
	var h http.Handler = srv
	switch t.(type) {
	case *testing.B, *testing.F: // the benchmarks measure the server alone; fuzz targets report to their own t
	default:
		h = openapitest.Handler(t, h, openapitest.Everything)
	}
	return &fixture{t: t, h: h, srv: srv, svc: env.Service, lines: env.Lines, rsv: env.Reservations, fc: env.Forecasts, store: env.Store, tokens: tokens, clock: clock,
		answers: env.Answers}
}

type response struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (r response) code() string {
	e, _ := r.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func (f *fixture) do(method, path, bearer, body string, header ...string) response {
	f.t.Helper()
	return f.doFrom("", method, path, bearer, body, header...)
}

// doFrom is do from the TCP peer remote ("host:port"; empty: httptest's 192.0.2.1:1234).
func (f *fixture) doFrom(remote, method, path, bearer, body string, header ...string) response {
	f.t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if remote != "" {
		req.RemoteAddr = remote
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	raw, _ := io.ReadAll(rec.Body)
	r := response{status: rec.Code, header: rec.Header(), raw: string(raw)}
	if len(raw) == 0 && rec.Code == http.StatusNoContent {
		return r
	}
	if err := json.Unmarshal(raw, &r.body); err != nil {
		f.t.Fatalf("%s %s: body is not JSON: %q", method, path, raw)
	}
	return r
}

func (f *fixture) user(name string) string {
	f.t.Helper()
	tok, err := f.tokens.Mint(name, f.clock.Now(), time.Hour)
	if err != nil {
		f.t.Fatal(err)
	}
	return tok
}

const validItem = `{"name":"Phone","kind":"item","stock":2,"price_cents":99900,"start_at":"2001-11-30T11:00:00Z","end_at":"2001-11-30T13:00:00Z"}`

func (f *fixture) create(body string) string {
	f.t.Helper()
	r := f.do("POST", "/api/admin/activities", adminToken, body)
	if r.status != http.StatusCreated {
		f.t.Fatalf("create: %d %s", r.status, r.raw)
	}
	return r.body["id"].(string)
}

func (f *fixture) activities() int {
	f.t.Helper()
	acts, err := f.store.Activities(context.Background(), time.Time{})
	if err != nil {
		f.t.Fatal(err)
	}
	return len(acts)
}

func TestClassify(t *testing.T) {
	tests := []struct {
		err    error
		status int
		code   string
	}{
		{sale.ErrInvalid, 400, "INVALID_ARGUMENT"},
		{sale.ErrUnauthorized, 401, "UNAUTHORIZED"},
		{sale.ErrNotStarted, 403, "NOT_STARTED"},
		{sale.ErrEnded, 403, "ENDED"},
		{sale.ErrChallengeRequired, 403, "CHALLENGE_REQUIRED"},
		{sale.ErrBlocked, 403, "BLOCKED"},
		{sale.ErrNotFound, 404, "NOT_FOUND"},
		{sale.ErrAlreadyBought, 409, "ALREADY_BOUGHT"},
		{sale.ErrInvalidState, 409, "INVALID_STATE"},
		{sale.ErrExists, 409, "ALREADY_EXISTS"},
		{sale.ErrSoldOut, 410, "SOLD_OUT"},
		{sale.ErrTooLarge, 413, "TOO_LARGE"},
		{sale.ErrRateLimited, 429, "RATE_LIMITED"},
		{sale.ErrBusy, 503, "BUSY"},
		{fmt.Errorf("grab a1: %w", sale.ErrSoldOut), 410, "SOLD_OUT"},
		{context.DeadlineExceeded, 503, "BUSY"},
		{fmt.Errorf("gate: %w", context.Canceled), 503, "BUSY"}, // the client hung up mid-call: not a fault of ours
		{errors.New("disk on fire"), 500, "INTERNAL"},
	}
	for _, tc := range tests {
		status, code := httpapi.Classify(tc.err)
		if status != tc.status || code != tc.code {
			t.Errorf("Classify(%v) = %d %s, want %d %s", tc.err, status, code, tc.status, tc.code)
		}
	}
}

func TestCreateActivityBadInput(t *testing.T) {
	f := newFixture(t, false)
	tests := []struct {
		name, bearer, body string
		status             int
		code               string
	}{
		{"no admin token", "", validItem, 401, "UNAUTHORIZED"},
		{"wrong admin token", "admin-secret-for-test", validItem, 401, "UNAUTHORIZED"},
		{"user token is not admin", f.user("alice"), validItem, 401, "UNAUTHORIZED"},
		{"empty body", adminToken, ``, 400, "INVALID_ARGUMENT"},
		{"malformed JSON", adminToken, `{"name":`, 400, "INVALID_ARGUMENT"},
		{"not an object", adminToken, `[1,2]`, 400, "INVALID_ARGUMENT"},
		{"trailing data", adminToken, validItem + `{}`, 400, "INVALID_ARGUMENT"},
		{"unknown field", adminToken, strings.Replace(validItem, `"name"`, `"stokc":1,"name"`, 1), 400, "INVALID_ARGUMENT"},
		{"missing name", adminToken, strings.Replace(validItem, `"name":"Phone",`, ``, 1), 400, "INVALID_ARGUMENT"},
		{"missing stock", adminToken, strings.Replace(validItem, `"stock":2,`, ``, 1), 400, "INVALID_ARGUMENT"},
		{"zero stock", adminToken, strings.Replace(validItem, `"stock":2`, `"stock":0`, 1), 400, "INVALID_ARGUMENT"},
		{"negative stock", adminToken, strings.Replace(validItem, `"stock":2`, `"stock":-5`, 1), 400, "INVALID_ARGUMENT"},
		{"absurd stock", adminToken, strings.Replace(validItem, `"stock":2`, `"stock":9223372036854775807`, 1), 400, "INVALID_ARGUMENT"},
		{"stock beyond int64", adminToken, strings.Replace(validItem, `"stock":2`, `"stock":1e30`, 1), 400, "INVALID_ARGUMENT"},
		{"fractional stock", adminToken, strings.Replace(validItem, `"stock":2`, `"stock":2.5`, 1), 400, "INVALID_ARGUMENT"},
		{"negative price", adminToken, strings.Replace(validItem, `99900`, `-1`, 1), 400, "INVALID_ARGUMENT"},
		{"string price", adminToken, strings.Replace(validItem, `99900`, `"999"`, 1), 400, "INVALID_ARGUMENT"},
		{"zero limit", adminToken, strings.Replace(validItem, `"stock":2`, `"stock":2,"per_user_limit":0`, 1), 400, "INVALID_ARGUMENT"},
		{"end before start", adminToken, strings.Replace(validItem, `13:00:00Z`, `10:00:00Z`, 1), 400, "INVALID_ARGUMENT"},
		{"end equals start", adminToken, strings.Replace(validItem, `13:00:00Z`, `11:00:00Z`, 1), 400, "INVALID_ARGUMENT"},
		{"bad time", adminToken, strings.Replace(validItem, `2001-11-30T11:00:00Z`, `tomorrow`, 1), 400, "INVALID_ARGUMENT"},
		{"missing end", adminToken, strings.Replace(validItem, `,"end_at":"2001-11-30T13:00:00Z"`, ``, 1), 400, "INVALID_ARGUMENT"},
		{"bad kind", adminToken, strings.Replace(validItem, `"item"`, `"car"`, 1), 400, "INVALID_ARGUMENT"},
		{"a currency in capitals", adminToken, strings.Replace(validItem, `"stock":2`, `"stock":2,"currency":"USD"`, 1), 400, "INVALID_ARGUMENT"},
		{"no currency at all", adminToken, strings.Replace(validItem, `"stock":2`, `"stock":2,"currency":"dollars"`, 1), 400, "INVALID_ARGUMENT"},
		{"negative stock shards", adminToken, strings.Replace(validItem, `"stock":2`, `"stock":2,"stock_shards":-1`, 1), 400, "INVALID_ARGUMENT"},
		{"more stock shards than units", adminToken, strings.Replace(validItem, `"stock":2`, `"stock":2,"stock_shards":3`, 1), 400, "INVALID_ARGUMENT"},
		{"too many stock shards", adminToken, strings.Replace(validItem, `"stock":2`, `"stock":2000,"stock_shards":65`, 1), 400, "INVALID_ARGUMENT"},
		{"a sharded red packet", adminToken, `{"name":"RP","kind":"redpacket","count":3,"total_cents":300,"stock_shards":2,"start_at":"2001-11-30T11:00:00Z","end_at":"2001-11-30T13:00:00Z"}`, 400, "INVALID_ARGUMENT"},
		{"a red packet past MaxShares", adminToken, `{"name":"RP","kind":"redpacket","count":1000001,"total_cents":100000000,"start_at":"2001-11-30T11:00:00Z","end_at":"2001-11-30T13:00:00Z"}`, 400, "INVALID_ARGUMENT"},
		{"zero pay window", adminToken, strings.Replace(validItem, `"stock":2`, `"stock":2,"pay_window_s":0`, 1), 400, "INVALID_ARGUMENT"},
		{"huge pay window", adminToken, strings.Replace(validItem, `"stock":2`, `"stock":2,"pay_window_s":99999999999`, 1), 400, "INVALID_ARGUMENT"},
		{"unknown admission", adminToken, strings.Replace(validItem, `"stock":2`, `"stock":2,"admission":"raffle"`, 1), 400, "INVALID_ARGUMENT"},
		{"require_challenge not a bool", adminToken, strings.Replace(validItem, `"stock":2`, `"stock":2,"require_challenge":"yes"`, 1), 400, "INVALID_ARGUMENT"},
		{"count on an item", adminToken, strings.Replace(validItem, `"stock":2`, `"stock":2,"count":2`, 1), 400, "INVALID_ARGUMENT"},
		{"red packet without count", adminToken, `{"name":"RP","kind":"redpacket","total_cents":100,"start_at":"2001-11-30T11:00:00Z","end_at":"2001-11-30T13:00:00Z"}`, 400, "INVALID_ARGUMENT"},
		{"red packet under a cent a share", adminToken, `{"name":"RP","kind":"redpacket","count":10,"total_cents":9,"start_at":"2001-11-30T11:00:00Z","end_at":"2001-11-30T13:00:00Z"}`, 400, "INVALID_ARGUMENT"},
		{"red packet with a price", adminToken, `{"name":"RP","kind":"redpacket","count":1,"total_cents":9,"price_cents":5,"start_at":"2001-11-30T11:00:00Z","end_at":"2001-11-30T13:00:00Z"}`, 400, "INVALID_ARGUMENT"},
		{"name too long", adminToken, strings.Replace(validItem, `"Phone"`, `"`+strings.Repeat("x", 201)+`"`, 1), 400, "INVALID_ARGUMENT"},
		{"body over the limit", adminToken, `{"name":"` + strings.Repeat("x", httpapi.MaxBody) + `"}`, 413, "TOO_LARGE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := f.do("POST", "/api/admin/activities", tc.bearer, tc.body)
			if r.status != tc.status || r.code() != tc.code {
				t.Fatalf("got %d %s (%s), want %d %s", r.status, r.code(), r.raw, tc.status, tc.code)
			}
			if n := f.activities(); n != 0 {
				t.Fatalf("a refused request left %d activities", n)
			}
		})
	}
	if id := f.create(validItem); id == "" {
		t.Fatal("the valid body was refused")
	}
}

func TestUserTokensAreChecked(t *testing.T) {
	f := newFixture(t, false)
	id := f.create(validItem)
	other, _ := auth.New([]byte("another secret that is 32 bytes!"), f.clock.Now)
	forged, _ := other.Mint("alice", f.clock.Now(), time.Hour)
	expired, _ := f.tokens.Mint("alice", f.clock.Now().Add(-2*time.Hour), time.Hour)
	for name, bearer := range map[string]string{"missing": "", "forged": forged, "expired": expired, "admin": adminToken, "garbage": "x.y.z"} {
		t.Run(name, func(t *testing.T) {
			r := f.do("POST", "/api/activities/"+id+"/grab", bearer, "")
			if r.status != 401 || r.code() != "UNAUTHORIZED" {
				t.Fatalf("got %d %s, want 401 UNAUTHORIZED", r.status, r.code())
			}
		})
	}
	if rem, _ := f.svc.Remaining(context.Background(), id); rem != 2 {
		t.Fatalf("refused grabs took units: %d remaining, want 2", rem)
	}
}

func TestGrabAnswers(t *testing.T) {
	f := newFixture(t, false)
	id := f.create(validItem) // stock 2, limit 1, open 11:00-13:00, the clock reads 12:00
	grab := func(user string, header ...string) response {
		return f.do("POST", "/api/activities/"+id+"/grab", f.user(user), "", header...)
	}
	first := grab("alice", "Idempotency-Key", "click-1")
	if first.status != 202 || first.body["status"] != "QUEUED" || first.body["order_token"] == "" || first.body["amount_cents"] != 99900.0 {
		t.Fatalf("first grab: %d %s", first.status, first.raw)
	}
	if again := grab("alice", "Idempotency-Key", "click-1"); again.status != 202 || again.body["order_token"] != first.body["order_token"] {
		t.Fatalf("retry with the same key: %d %s, want the first answer %s", again.status, again.raw, first.raw)
	}
	tests := []struct {
		name   string
		r      response
		status int
		code   string
	}{
		{"second unit without a key", grab("alice"), 409, "ALREADY_BOUGHT"},
		{"second unit with a new key", grab("alice", "Idempotency-Key", "click-2"), 409, "ALREADY_BOUGHT"},
		{"bad idempotency key", grab("bob", "Idempotency-Key", "has space"), 400, "INVALID_ARGUMENT"},
		{"long idempotency key", grab("bob", "Idempotency-Key", strings.Repeat("k", 129)), 400, "INVALID_ARGUMENT"},
		{"last unit", grab("bob"), 202, ""},
		{"sold out", grab("carol"), 410, "SOLD_OUT"},
		{"unknown activity", f.do("POST", "/api/activities/nope/grab", f.user("dave"), ""), 404, "NOT_FOUND"},
		{"invalid activity id", f.do("POST", "/api/activities/%2e%2e/grab", f.user("dave"), ""), 404, "NOT_FOUND"},
	}
	for _, tc := range tests {
		if tc.r.status != tc.status || tc.r.code() != tc.code {
			t.Errorf("%s: got %d %s (%s), want %d %s", tc.name, tc.r.status, tc.r.code(), tc.r.raw, tc.status, tc.code)
		}
	}
	// Once sold out, the local flag answers before the token is checked, unless the request
	// carries an idempotency key (it may be owed its first answer).
	if r := f.do("POST", "/api/activities/"+id+"/grab", "", ""); r.status != 410 || r.code() != "SOLD_OUT" {
		t.Errorf("anonymous grab of a sold-out activity: %d %s, want 410 SOLD_OUT", r.status, r.code())
	}
	if r := f.do("POST", "/api/activities/"+id+"/grab", "", "", "Idempotency-Key", "k"); r.status != 401 {
		t.Errorf("anonymous keyed grab of a sold-out activity: %d %s, want 401", r.status, r.code())
	}

	open := f.create(validItem)
	f.clock.Advance(-2 * time.Hour)
	if r := f.do("POST", "/api/activities/"+open+"/grab", f.user("erin"), ""); r.status != 403 || r.code() != "NOT_STARTED" {
		t.Errorf("before the start: %d %s", r.status, r.code())
	}
	f.clock.Advance(4 * time.Hour)
	if r := f.do("POST", "/api/activities/"+open+"/grab", f.user("erin"), ""); r.status != 403 || r.code() != "ENDED" {
		t.Errorf("after the end: %d %s", r.status, r.code())
	}
}

func (f *fixture) waitStatus(user, token string, want sale.Status) response {
	f.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := f.do("GET", "/api/orders/"+token, f.user(user), "")
		if r.body["status"] == string(want) || time.Now().After(deadline) {
			if r.body["status"] != string(want) {
				f.t.Fatalf("order %s: %s, want %s", token, r.raw, want)
			}
			return r
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestOrderLifecycle(t *testing.T) {
	f := newFixture(t, false)
	id := f.create(strings.Replace(validItem, `"stock":2`, `"stock":3,"pay_window_s":60`, 1))
	tokens := map[string]string{}
	for _, u := range []string{"alice", "bob", "carol"} {
		r := f.do("POST", "/api/activities/"+id+"/grab", f.user(u), "")
		tokens[u] = r.body["order_token"].(string)
	}
	created := f.waitStatus("alice", tokens["alice"], sale.StatusCreated)
	if created.body["order_id"] == nil || created.body["expires_at"] == nil {
		t.Fatalf("created order lacks id or expiry: %s", created.raw)
	}
	byID := fmt.Sprint(int64(created.body["order_id"].(float64)))
	if r := f.do("GET", "/api/orders/"+byID, f.user("alice"), ""); r.body["order_token"] != tokens["alice"] {
		t.Fatalf("order by id: %s", r.raw)
	}
	if r := f.do("GET", "/api/orders/"+tokens["alice"], f.user("bob"), ""); r.status != 404 {
		t.Fatalf("someone else's order: %d %s, want 404", r.status, r.raw)
	}
	if r := f.do("GET", "/api/orders/gnope", f.user("bob"), ""); r.status != 404 || r.code() != "NOT_FOUND" {
		t.Fatalf("unknown order: %d %s", r.status, r.raw)
	}
	f.waitStatus("bob", tokens["bob"], sale.StatusCreated)
	f.waitStatus("carol", tokens["carol"], sale.StatusCreated)

	steps := []struct {
		user, op string
		status   int
		want     string // order status or error code
	}{
		{"alice", "pay", 200, "PAID"},
		{"alice", "pay", 200, "PAID"},
		{"alice", "cancel", 409, "INVALID_STATE"},
		{"bob", "cancel", 200, "CANCELLED"},
		{"bob", "cancel", 200, "CANCELLED"},
		{"bob", "pay", 409, "INVALID_STATE"},
		{"carol", "pay", 404, "NOT_FOUND"}, // bob's token in carol's hands: see below
	}
	for i, s := range steps {
		tok := tokens[s.user]
		if i == len(steps)-1 {
			tok = tokens["bob"]
		}
		r := f.do("POST", "/api/orders/"+tok+"/"+s.op, f.user(s.user), "")
		got := r.code()
		if got == "" {
			got, _ = r.body["status"].(string)
		}
		if r.status != s.status || got != s.want {
			t.Errorf("step %d: %s %s: %d %s, want %d %s", i, s.user, s.op, r.status, r.raw, s.status, s.want)
		}
	}
	// carol does not pay: the sweeper's rule cancels her order once the window closes.
	f.clock.Advance(2 * time.Minute)
	if r := f.do("POST", "/api/orders/"+tokens["carol"]+"/pay", f.user("carol"), ""); r.status != 409 {
		t.Fatalf("pay after the window: %d %s, want 409", r.status, r.raw)
	}
	if n, err := f.svc.SweepExpired(context.Background(), 10); err != nil || n != 1 {
		t.Fatalf("sweep = %d, %v; want 1", n, err)
	}
	st, err := f.svc.Stats(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Remaining != 2 || st.Paid != 1 || st.Cancelled != 2 || st.Expired != 1 {
		t.Fatalf("stats after the sale: %+v; want 2 remaining (two restocked), 1 paid, 2 cancelled (1 expired)", st)
	}
}

func TestAdminEndpoints(t *testing.T) {
	f := newFixture(t, false)
	id := f.create(validItem)
	r := f.do("GET", "/api/admin/activities/"+id+"/stats", adminToken, "")
	if r.status != 200 || r.body["stock"] != 2.0 || r.body["remaining"] != 2.0 {
		t.Fatalf("stats: %d %s", r.status, r.raw)
	}
	if r := f.do("GET", "/api/admin/activities/nope/stats", adminToken, ""); r.status != 404 {
		t.Fatalf("stats of an unknown activity: %d", r.status)
	}
	if r := f.do("POST", "/api/admin/activities/"+id+"/reconcile", adminToken, ""); r.status != 200 || r.body["ok"] != true {
		t.Fatalf("reconcile: %d %s", r.status, r.raw)
	}
	if r := f.do("GET", "/api/admin/activities/"+id+"/stats", "", ""); r.status != 401 {
		t.Fatalf("stats without a token: %d", r.status)
	}
	pub := f.do("GET", "/api/activities/"+id, "", "")
	if pub.status != 200 || pub.body["status"] != "active" || pub.body["remaining"] != 2.0 {
		t.Fatalf("public activity: %s", pub.raw)
	}
}

func TestRoutingAndPlumbing(t *testing.T) {
	f := newFixture(t, false)
	if r := f.do("GET", "/nowhere", "", ""); r.status != 404 || r.code() != "NOT_FOUND" {
		t.Errorf("unknown route: %d %s", r.status, r.raw)
	}
	r := f.do("DELETE", "/api/activities/x/grab", "", "")
	if r.status != 405 || r.code() != "METHOD_NOT_ALLOWED" || r.header.Get("Allow") == "" {
		t.Errorf("wrong method: %d %s allow=%q", r.status, r.raw, r.header.Get("Allow"))
	}
	if r := f.do("POST", "/api/login", "", `{"user":"alice"}`); r.status != 404 {
		t.Errorf("dev login without demo mode: %d %s", r.status, r.raw)
	}
	if r := f.do("GET", "/healthz", "", "", "X-Request-Id", "abc-123"); r.status != 200 || r.header.Get("X-Request-Id") != "abc-123" {
		t.Errorf("healthz: %d, request id %q", r.status, r.header.Get("X-Request-Id"))
	}
	r1, r2 := f.do("GET", "/readyz", "", ""), f.do("GET", "/readyz", "", "", "X-Request-Id", "bad id!")
	if id1, id2 := r1.header.Get("X-Request-Id"), r2.header.Get("X-Request-Id"); r1.status != 200 || id1 == "" || id2 == "" || id1 == id2 {
		t.Errorf("readyz: %d, request ids %q and %q, want two distinct ones", r1.status, id1, id2)
	}
	if r := f.do("GET", "/api/time", "", ""); r.body["now_ms"] != float64(f.clock.Now().UnixMilli()) {
		t.Errorf("time: %s", r.raw)
	}
}

func TestDevLogin(t *testing.T) {
	f := newFixture(t, true)
	r := f.do("POST", "/api/login", "", `{"user":"alice"}`)
	if r.status != 200 {
		t.Fatalf("login: %d %s", r.status, r.raw)
	}
	if user, err := f.tokens.Verify(r.body["token"].(string)); err != nil || user != "alice" {
		t.Fatalf("login token verifies as %q, %v", user, err)
	}
	for _, body := range []string{`{"user":""}`, `{"user":"a b"}`, `{"name":"x"}`, `nope`} {
		if r := f.do("POST", "/api/login", "", body); r.status != 400 || r.code() != "INVALID_ARGUMENT" {
			t.Errorf("login %s: %d %s", body, r.status, r.raw)
		}
	}
}

func TestRedPacketSharesSumToTheTotal(t *testing.T) {
	f := newFixture(t, false)
	const count, total = 50, 10_000
	id := f.create(fmt.Sprintf(`{"name":"Lucky money","kind":"redpacket","count":%d,"total_cents":%d,`+
		`"start_at":"2001-11-30T11:00:00Z","end_at":"2001-11-30T13:00:00Z"}`, count, total))
	var sum int64
	tokens := map[string]string{}
	for u := range count + 10 {
		user := fmt.Sprint("u", u)
		r := f.do("POST", "/api/activities/"+id+"/grab", f.user(user), "")
		switch {
		case u < count && r.status == 202:
			amount := int64(r.body["amount_cents"].(float64))
			if amount < 1 {
				t.Fatalf("share of %d cents", amount)
			}
			sum += amount
			tokens[user] = r.body["order_token"].(string)
		case u >= count && r.status == 410:
		default:
			t.Fatalf("grab %d: %d %s", u, r.status, r.raw)
		}
	}
	if sum != total {
		t.Fatalf("shares won sum to %d cents, want %d", sum, total)
	}
	var placed int64
	for user, tok := range tokens {
		o := f.waitStatus(user, tok, sale.StatusCreated)
		placed += int64(o.body["amount_cents"].(float64))
	}
	if placed != total {
		t.Fatalf("orders sum to %d cents, want %d", placed, total)
	}
}
