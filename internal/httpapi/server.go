// Package httpapi is seckill's HTTP API: routes, authentication, request decoding, and the one
// function that maps the domain's errors to statuses and stable JSON error codes. Handlers read
// top to bottom: decode, validate, one call into the sale service, encode.
package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"seckill/internal/auth"
	"seckill/internal/breaker"
	"seckill/internal/funnel"
	"seckill/internal/httpapi/wire"
	"seckill/internal/ratelimit"
	"seckill/internal/risk"
	"seckill/internal/sale"
)

// MaxBody is the largest request body accepted, in bytes.
const MaxBody = 64 << 10

// LoginTTL is how long a dev-login token lives.
const LoginTTL = 24 * time.Hour

// Config is what a Server needs.
type Config struct {
	Service *sale.Service
	// Features are the services beside the core one (see internal/sale), each served only when
	// set: their routes are the server's only then, and a node without one says nothing of it.
	// Payments needs the notices of its providers: Callback, Notices.
	sale.Features
	// Plan sizes the deployment for a forecast's peak (capacity planning; nil: the forecast has
	// no plan), its errors wrapping sale.ErrInvalid for terms it refuses; MinReplicas is the
	// node's SECKILL_REDIS_MIN_REPLICAS, the plan's default.
	Plan        func(sale.Forecast, PlanTerms) (any, error)
	MinReplicas int

	Tokens *auth.Tokens
	// AdminToken is the operator token named "admin"; Admins are more admin tokens, each with
	// its name and role.
	AdminToken string
	Admins     []Admin
	DevLogin   bool                            // serve POST /api/login (demo mode only)
	Ready      func(ctx context.Context) error // nil error when every dependency answers
	Log        *slog.Logger
	// Limits are the grab endpoint's rate limits; the zero value limits nothing.
	Limits Limits
	// TrustedProxies are the peers whose X-Forwarded-For names the client; from any other peer
	// the client is the peer itself.
	TrustedProxies []netip.Prefix
	// Observe, when set, counts every grab by outcome. The metrics it keeps are not the API's
	// to serve: the node serves them on a listener of its own (SECKILL_METRICS_ADDR), which the
	// public does not reach.
	Observe Observer
	// Health is the node's health: shown by /readyz and the admin stats, and what decides
	// which non-core work is shed. Nil: always normal.
	Health *breaker.Monitor
	// Callback, when set, takes the generic provider's signed callbacks at
	// POST /api/payments/callback; Notices take the other providers' notices, each at
	// POST /api/payments/{name}. Without Payments, the pay call pays.
	Callback *Callback
	Notices  []Notices
	// Risk scores grabs and challenge answers; nil: no risk rules.
	Risk *risk.Engine
	// Live records every grab of a known activity for the admin dashboard's live view; nil: a
	// tracker of the server's own.
	Live *funnel.Tracker
	// Pages, when set, serves the web pages at each of PagePatterns (ServeMux patterns), with
	// the API's request ids, logging and cross-origin check.
	Pages        http.Handler
	PagePatterns []string
}

// Limits are the grab endpoint's rate limits and where they are kept: per client IP in sliding
// windows, per user and per activity (the whole crowd) in token buckets. In the embedded mode
// they live in the process; in the distributed mode on Redis, shared by every node. PerNode is
// an activity's crowd on this node alone, in buckets of this process (Local) in either mode:
// the front of the global limit that costs Redis nothing, so that a peak far above what the
// item's master takes is turned away before it queues for Redis (seckill plan sizes it).
//
// UserAtGate says the gate checks the per-user rate in a grab's own call (the Redis gate: see
// sale.GrabRequest.UserRate): the grab of an activity admitted directly then costs one Redis
// call and one fsync wait, not two, and its user's bucket is per activity, on the activity's
// slot. Challenges, and the activities with a line, keep the edge's bucket.
type Limits struct {
	PerIP, PerUser, PerActivity, PerNode ratelimit.Rule
	Windows, Buckets                     ratelimit.Limiter
	Local                                ratelimit.Limiter // nil: buckets of this process on the wall clock
	UserAtGate                           bool
}

// Server serves the API.
type Server struct {
	svc          *sale.Service
	operator     *sale.Operator
	payments     *sale.Payments
	outbox       *sale.Outbox
	lines        *sale.Lines
	reservations *sale.Reservations
	forecasts    *sale.Forecasts
	plan         func(sale.Forecast, PlanTerms) (any, error)
	minReplicas  int
	boards       *sale.Boards
	challenges   *sale.Challenges
	blocks       *sale.Blocks
	audit        *sale.Audit
	tokens       *auth.Tokens
	admins       []Admin
	devLogin     bool
	ready        func(ctx context.Context) error
	log          *slog.Logger
	mux          *http.ServeMux
	ids          *idSource
	limits       Limits
	trusted      []netip.Prefix
	observe      Observer
	health       *breaker.Monitor
	risk         *risk.Engine
	riskLog      riskLog // samples the model's log lines
	callback     *Callback
	notices      []Notices
	csrf         *http.CrossOriginProtection
	live         *funnel.Tracker
	streams      atomic.Int32  // live streams open
	stop         chan struct{} // closed by StopStreams
	stopOnce     sync.Once
}

// New returns a Server.
func New(c Config) *Server {
	admins := append([]Admin(nil), c.Admins...)
	if c.AdminToken != "" {
		admins = append(admins, Admin{Name: "admin", Role: RoleOperator, Token: c.AdminToken})
	}
	s := &Server{svc: c.Service, tokens: c.Tokens, admins: admins, devLogin: c.DevLogin,
		ready: c.Ready, log: c.Log, mux: http.NewServeMux(), ids: newIDSource(), limits: c.Limits,
		trusted: c.TrustedProxies, observe: c.Observe, health: c.Health, risk: c.Risk, callback: c.Callback, notices: c.Notices,
		csrf: http.NewCrossOriginProtection(), live: c.Live, stop: make(chan struct{})}
	s.operator, s.outbox, s.lines, s.boards = c.Operator, c.Outbox, c.Lines, c.Boards
	s.challenges, s.blocks, s.audit, s.payments = c.Challenges, c.Blocks, c.Audit, c.Payments
	s.reservations, s.forecasts, s.plan, s.minReplicas = c.Reservations, c.Forecasts, c.Plan, c.MinReplicas
	if s.observe == nil {
		s.observe = noObserver{}
	}
	if s.callback != nil && s.callback.Now == nil {
		cb := *s.callback
		cb.Now = time.Now
		s.callback = &cb
	}
	if s.limits.Windows == nil {
		s.limits.Windows = ratelimit.NewWindows(time.Now)
	}
	if s.limits.Buckets == nil {
		s.limits.Buckets = ratelimit.NewBuckets(time.Now)
	}
	if s.limits.Local == nil {
		s.limits.Local = ratelimit.NewBuckets(time.Now)
	}
	if s.live == nil {
		s.live = funnel.New(s.svc.Now)
	}
	for _, rt := range s.routes() {
		s.mux.HandleFunc(rt.pattern, rt.handler)
	}
	if c.Pages != nil {
		for _, p := range c.PagePatterns {
			s.mux.Handle(p, c.Pages)
		}
	}
	return s
}

// route is one of the API's routes: a ServeMux pattern and its handler. The OpenAPI document
// (openapi.yaml) describes each of them, and nothing else.
type route struct {
	pattern string
	handler http.HandlerFunc
}

func (s *Server) routes() []route {
	rs := []route{
		{"GET /healthz", s.healthz},
		{"GET /readyz", s.readyz},
		{"GET /openapi.json", s.openapi},
		{"GET /api/time", s.time},
		{"POST /api/login", s.login},

		{"POST /api/admin/activities", s.admin(RoleOperator, s.createActivity)},
		{"GET /api/admin/activities/{id}/stats", s.admin(RoleViewer, s.stats)},
		{"POST /api/admin/activities/{id}/reconcile", s.admin(RoleOperator, s.reconcile)},
		{"GET /api/admin/activities/{id}/events", s.admin(RoleViewer, s.events)},
		{"GET /api/admin/features", s.admin(RoleViewer, s.features)},

		{"GET /api/activities", s.activities},
		{"GET /api/activities/{id}", s.activity},
		{"POST /api/activities/{id}/grab", s.grab},
		{"POST /api/activities/{id}/grab/{pass}", s.grab},
		{"GET /api/orders/{ref}", s.user(s.order)},
		{"POST /api/orders/{ref}/pay", s.user(s.pay)},
		{"POST /api/orders/{ref}/cancel", s.user(s.cancel)},
	}
	// Each feature's routes, when the node has it.
	if s.operator != nil {
		rs = append(rs,
			route{"GET /api/admin/activities", s.admin(RoleViewer, s.allActivities)},
			route{"GET /api/admin/activities/{id}/orders.csv", s.admin(RoleViewer, s.exportOrders)},
			route{"GET /api/admin/orders", s.admin(RoleViewer, s.orders)},
			route{"GET /api/admin/dead-letters", s.admin(RoleViewer, s.deadLetters)},
			route{"POST /api/admin/dead-letters/replay", s.admin(RoleOperator, s.replayDeadLetter)},
			route{"PATCH /api/admin/activities/{id}", s.admin(RoleOperator, s.editActivity)},
			route{"POST /api/admin/activities/{id}/stock", s.admin(RoleOperator, s.addStock)},
			route{"POST /api/admin/activities/{id}/end", s.admin(RoleOperator, s.endActivity)})
	}
	if s.blocks != nil {
		rs = append(rs,
			route{"POST /api/admin/blocks", s.admin(RoleOperator, s.addBlock)},
			route{"GET /api/admin/blocks", s.admin(RoleViewer, s.listBlocks)},
			route{"DELETE /api/admin/blocks/{kind}/{value...}", s.admin(RoleOperator, s.removeBlock)})
	}
	if s.audit != nil {
		rs = append(rs, route{"GET /api/admin/audit", s.admin(RoleViewer, s.auditLog)})
	}
	if s.outbox != nil {
		rs = append(rs,
			route{"GET /api/admin/deliveries", s.admin(RoleViewer, s.deliveries)},
			route{"POST /api/admin/deliveries/replay", s.admin(RoleOperator, s.replay)})
	}
	if s.payments != nil {
		rs = append(rs,
			route{"GET /api/admin/payments", s.admin(RoleViewer, s.paymentList)},
			route{"POST /api/admin/payments/{id}/refunded", s.admin(RoleOperator, s.refunded)},
			route{"GET /api/payments/providers", s.providerList})
		if s.callback != nil {
			rs = append(rs, route{"POST /api/payments/callback", s.paymentCallback})
		}
		for _, n := range s.notices {
			rs = append(rs, route{"POST /api/payments/" + n.Name(), s.notice(n)})
		}
	}
	if s.boards != nil {
		rs = append(rs,
			route{"GET /api/activities/{id}/leaderboard", s.leaderboard},
			route{"GET /api/activities/{id}/rank", s.user(s.rank)})
	}
	if s.challenges != nil {
		rs = append(rs,
			route{"POST /api/activities/{id}/challenge", s.challenge},
			route{"POST /api/activities/{id}/challenge/answer", s.answer})
	}
	if s.lines != nil {
		rs = append(rs,
			route{"GET /api/activities/{id}/entries", s.entries},
			route{"GET /api/queue/{token}", s.user(s.ticket)})
	}
	if s.reservations != nil {
		rs = append(rs,
			route{"POST /api/activities/{id}/reservations", s.reserve},
			route{"GET /api/activities/{id}/reservations/me", s.user(s.myReservation)},
			route{"GET /api/admin/activities/{id}/reservations.csv", s.admin(RoleViewer, s.exportReservations)})
	}
	if s.forecasts != nil {
		rs = append(rs, route{"GET /api/admin/activities/{id}/forecast", s.admin(RoleViewer, s.forecast)})
	}
	return rs
}

func (s *Server) features(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, wire.FeaturesResponse{Operator: s.operator != nil, Payments: s.payments != nil, PaymentProviders: s.paymentProviders(),
		Outbox: s.outbox != nil, Lines: s.lines != nil, Boards: s.boards != nil, Challenges: s.challenges != nil, Reservations: s.reservations != nil, Forecasts: s.forecasts != nil,
		Blocks: s.blocks != nil, Audit: s.audit != nil})
}

// ServeHTTP gives every request an id, bounds its body, recovers from panics, logs, and turns
// the mux's plain-text 404 and 405 answers into JSON errors like every other.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("X-Request-Id")
	if !validRequestID(id) {
		id = s.ids.next()
	}
	w.Header().Set("X-Request-Id", id)
	if r.ContentLength != 0 { // a body, or a chunked one of unknown length: bound it
		r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
	}
	start := time.Now()
	rec := &recorder{ResponseWriter: w, id: id, method: r.Method, start: start}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.ErrorContext(r.Context(), "panic", "panic", p, "path", r.URL.Path, "request_id", id)
			if rec.status == 0 {
				writeJSON(w, http.StatusInternalServerError, wire.ErrorBody{Error: wire.Error{Code: wire.CodeInternal, Message: "internal error"}})
			}
			return
		}
		if lvl := logLevelFor(rec.status); s.log.Enabled(r.Context(), lvl) {
			s.log.Log(r.Context(), lvl, "request", "method", r.Method, "path", r.URL.Path, "status", rec.status,
				"duration", time.Since(start), "request_id", id)
		}
	}()
	// A browser on another site may not make a user's browser change anything here. Bearer
	// tokens already keep plain forms out; this also refuses scripts, by the browser's own
	// Sec-Fetch-Site and Origin headers.
	if err := s.csrf.Check(r); err != nil {
		s.writeError(rec, r, fmt.Errorf("%w: cross-origin request refused", sale.ErrForbidden))
		return
	}
	s.mux.ServeHTTP(rec, r)
}

// recorder remembers the status written and replaces the mux's own plain-text 404 and 405
// (unknown route, wrong method) with JSON errors. Handlers' answers pass through untouched.
type recorder struct {
	http.ResponseWriter
	id      string
	method  string
	start   time.Time // when ServeHTTP took the request
	status  int
	swallow bool // the mux's plain-text body is being dropped
}

// requestStart is when ServeHTTP took the request w answers (now, outside ServeHTTP).
func requestStart(w http.ResponseWriter) time.Time {
	if rec, ok := w.(*recorder); ok {
		return rec.start
	}
	return time.Now()
}

func (r *recorder) WriteHeader(status int) {
	if r.status != 0 {
		return
	}
	r.status = status
	h := r.Header()
	if (status == http.StatusNotFound || status == http.StatusMethodNotAllowed) &&
		strings.HasPrefix(h.Get("Content-Type"), "text/plain") {
		r.swallow = true
		h.Del("X-Content-Type-Options")
		code, msg := wire.CodeNotFound, "no such route"
		if status == http.StatusMethodNotAllowed {
			code, msg = wire.CodeMethodNotAllowed, "method not allowed"
		}
		writeJSON(r.ResponseWriter, status, wire.ErrorBody{Error: wire.Error{Code: code, Message: msg}})
		return
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if r.swallow {
		return len(b), nil
	}
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// requestID returns the id ServeHTTP gave the request answered through w.
func requestID(w http.ResponseWriter) string {
	if rec, ok := w.(*recorder); ok {
		return rec.id
	}
	return ""
}

// idSource makes request ids: a random prefix per process and a counter, unique without a
// system call per request.
type idSource struct {
	prefix string
	n      atomic.Uint64
}

func newIDSource() *idSource {
	var b [4]byte
	rand.Read(b[:])
	return &idSource{prefix: hex.EncodeToString(b[:])}
}

func (s *idSource) next() string {
	return s.prefix + "-" + strconv.FormatUint(s.n.Add(1), 36)
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

type userHandler func(w http.ResponseWriter, r *http.Request, user string)

// user authenticates a user's bearer token before h.
func (s *Server) user(h userHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		user, _, err := s.authenticate(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		h(w, r, user)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"INTERNAL","message":"internal error"}}`)
	}
	writeBody(w, status, append(b, '\n'))
}

// Shared header values: assigned directly, they cost no allocation per response.
var (
	jsonType = []string{"application/json"}
	noStore  = []string{"no-store"}
)

// writeBody sends a JSON body. Answers to GET say no-store (orders and stock change under the
// reader); answers to POST are not cacheable anyway, so the grab path sends one header less.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = jsonType
	if rec, ok := w.(*recorder); !ok || rec.method == http.MethodGet {
		h["Cache-Control"] = noStore
	}
	w.WriteHeader(status)
	w.Write(body)
}
