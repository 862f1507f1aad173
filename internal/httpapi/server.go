// Package httpapi is seckill's HTTP API: routes, authentication, request decoding, and the one
// function that maps the domain's errors to statuses and stable JSON error codes. Handlers read
// top to bottom: decode, validate, one call into the sale service, encode.
package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"seckill/internal/auth"
	"seckill/internal/sale"
)

// MaxBody is the largest request body accepted, in bytes.
const MaxBody = 64 << 10

// LoginTTL is how long a dev-login token lives.
const LoginTTL = 24 * time.Hour

// Config is what a Server needs.
type Config struct {
	Service    *sale.Service
	Tokens     *auth.Tokens
	AdminToken string
	DevLogin   bool                            // serve POST /api/login (demo mode only)
	Ready      func(ctx context.Context) error // nil error when every dependency answers
	Log        *slog.Logger
}

// Server serves the API.
type Server struct {
	svc        *sale.Service
	tokens     *auth.Tokens
	adminToken string
	devLogin   bool
	ready      func(ctx context.Context) error
	log        *slog.Logger
	mux        *http.ServeMux
}

// New returns a Server.
func New(c Config) *Server {
	s := &Server{svc: c.Service, tokens: c.Tokens, adminToken: c.AdminToken, devLogin: c.DevLogin,
		ready: c.Ready, log: c.Log, mux: http.NewServeMux()}
	s.routes()
	return s
}

func (s *Server) routes() {
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
	s.mux.HandleFunc("GET /api/time", s.time)
	s.mux.HandleFunc("POST /api/login", s.login)

	s.mux.HandleFunc("POST /api/admin/activities", s.admin(s.createActivity))
	s.mux.HandleFunc("GET /api/admin/activities/{id}/stats", s.admin(s.stats))
	s.mux.HandleFunc("POST /api/admin/activities/{id}/reconcile", s.admin(s.reconcile))

	s.mux.HandleFunc("GET /api/activities/{id}", s.activity)
	s.mux.HandleFunc("POST /api/activities/{id}/grab", s.user(s.grab))
	s.mux.HandleFunc("GET /api/orders/{ref}", s.user(s.order))
	s.mux.HandleFunc("POST /api/orders/{ref}/pay", s.user(s.pay))
	s.mux.HandleFunc("POST /api/orders/{ref}/cancel", s.user(s.cancel))
}

// ServeHTTP gives every request an id, bounds its body, recovers from panics, and answers
// unknown routes with the same JSON errors as everything else.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("X-Request-Id")
	if !validRequestID(id) {
		id = newRequestID()
	}
	w.Header().Set("X-Request-Id", id)
	r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
	r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
	rec := &statusRecorder{ResponseWriter: w}
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.ErrorContext(r.Context(), "panic", "panic", p, "path", r.URL.Path, "request_id", id)
			if rec.status == 0 {
				writeJSON(w, http.StatusInternalServerError, errorBody{Error: errorDetail{CodeInternal, "internal error"}})
			}
			return
		}
		if lvl := logLevelFor(rec.status); s.log.Enabled(r.Context(), lvl) {
			s.log.Log(r.Context(), lvl, "request", "method", r.Method, "path", r.URL.Path, "status", rec.status,
				"duration", time.Since(start), "request_id", id)
		}
	}()
	if h, pattern := s.mux.Handler(r); pattern == "" {
		s.noRoute(rec, r, h)
		return
	}
	s.mux.ServeHTTP(rec, r)
}

// noRoute turns the mux's plain-text 404 and 405 into JSON errors, keeping its Allow header.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request, h http.Handler) {
	probe := &headerProbe{header: http.Header{}}
	h.ServeHTTP(probe, r)
	if allow := probe.header.Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
	}
	if probe.status == http.StatusMethodNotAllowed {
		writeJSON(w, probe.status, errorBody{Error: errorDetail{CodeMethodNotAllowed, "method not allowed"}})
		return
	}
	writeJSON(w, http.StatusNotFound, errorBody{Error: errorDetail{CodeNotFound, "no such route"}})
}

// headerProbe records what the mux's fallback handler would answer, without sending it.
type headerProbe struct {
	header http.Header
	status int
}

func (p *headerProbe) Header() http.Header         { return p.header }
func (p *headerProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *headerProbe) WriteHeader(status int)      { p.status = status }

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

type requestIDKey struct{}

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

func newRequestID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
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
		tok, ok := bearer(r)
		if !ok {
			s.writeError(w, r, errNoBearer)
			return
		}
		user, err := s.tokens.Verify(tok)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		h(w, r, user)
	}
}

// admin checks the admin bearer token, in constant time, before h.
func (s *Server) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, ok := bearer(r)
		if !ok || !auth.Equal(tok, s.adminToken) {
			s.writeError(w, r, errBadAdmin)
			return
		}
		h(w, r)
	}
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if len(h) < 7 || !strings.EqualFold(h[:7], "bearer ") {
		return "", false
	}
	tok := strings.TrimSpace(h[7:])
	return tok, tok != ""
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"INTERNAL","message":"internal error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
