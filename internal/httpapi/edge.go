package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"seckill/internal/ratelimit"
	"seckill/internal/sale"
)

// limit checks one rate limit. When it refuses, it sets Retry-After and returns
// sale.ErrRateLimited; when it cannot decide, a BUSY error (fail closed).
func (s *Server) limit(w http.ResponseWriter, r *http.Request, l ratelimit.Limiter, key string, rule ratelimit.Rule) error {
	if rule.Off() {
		return nil
	}
	d, err := l.Allow(r.Context(), key, rule)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %v", sale.ErrBusy, err)
	case !d.Allowed:
		w.Header()["Retry-After"] = retryAfterHeader(d.RetryAfter)
		return sale.ErrRateLimited
	}
	return nil
}

// retryAfterHeaders are the Retry-After header values of the usual waits, shared by every
// answer (net/http never writes into a header's values), so a refusal costs no allocation.
var retryAfterHeaders = func() (out [61][]string) {
	for i := range out {
		out[i] = []string{ratelimit.RetryAfterSeconds(time.Duration(i) * time.Second)}
	}
	return out
}()

func retryAfterHeader(d time.Duration) []string {
	v := ratelimit.RetryAfterSeconds(d)
	if n, err := strconv.Atoi(v); err == nil && n < len(retryAfterHeaders) {
		return retryAfterHeaders[n]
	}
	return []string{v}
}

// limitOutcome names a refusal by limit for the metrics: rate_limited_ip and so on, or busy.
func limitOutcome(err error, which string) string {
	if !errors.Is(err, sale.ErrRateLimited) {
		return outcomeOf(err)
	}
	switch which {
	case "ip":
		return "rate_limited_ip"
	case "user":
		return "rate_limited_user"
	case "activity":
		return "rate_limited_activity"
	case "node":
		return "rate_limited_node"
	}
	return "rate_limited_" + which
}

// Observer is told what the edge endpoints did, for the metrics: every grab's outcome and
// latency, every challenge's outcome ("issued", "solved", or the refusal).
type Observer interface {
	Grab(outcome string, d time.Duration)
	Challenge(outcome string)
}

type noObserver struct{}

func (noObserver) Grab(string, time.Duration) {}
func (noObserver) Challenge(string)           {}

// clientIP is the address of the client: the TCP peer, unless the peer is a trusted proxy; then
// the X-Forwarded-For entries are read from the right (the one the trusted proxy appended) and
// the first address that is not itself a trusted proxy is the client. Entries further left were
// written by whoever sent the request and prove nothing, so rotating them gains nothing.
func (s *Server) clientIP(r *http.Request) netip.Addr {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{} // not a TCP peer (a test's request): every such client shares a limit
	}
	ip := peer.Addr().Unmap()
	if !s.trustedPeer(ip) {
		return ip
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return ip // a garbled chain: trust only what the proxy itself is
		}
		if hop = hop.Unmap(); !s.trustedPeer(hop) {
			return hop
		}
		ip = hop
	}
	return ip
}

func (s *Server) trustedPeer(ip netip.Addr) bool {
	for _, p := range s.trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// override applies an activity's own rate (sale.EffectiveRate) to the node's rule; the burst of a token
// bucket follows its rate (a window has none).
func override(node ratelimit.Rule, own int64) ratelimit.Rule {
	if own == 0 {
		return node
	}
	r := int(sale.EffectiveRate(own, int64(node.PerSecond)))
	return ratelimit.Rule{PerSecond: r, Burst: r}
}

// caller is who a request comes from, as the edge found: the user its token names, the token,
// the client's address, and for a grab the user's rate left to the gate to check.
type caller struct {
	user, token string
	ip          netip.Addr
	rate        sale.UserRate
}

// outcomeSoldOutEdge is a grab the node's sold-out flag turned away before its token was read.
const outcomeSoldOutEdge = "sold_out_edge"

// edge runs the layers in front of the gate for a request about activity id, cheapest first:
// the local sold-out flag (unless retry, a request that may be owed an earlier answer), the
// client IP's rate limit and block, the user's token and block, the activity's limit on this
// node (in memory), the user's and the activity's rate limits (on Redis in the distributed
// mode). It returns the caller, or the error to answer with and, when the error alone does
// not say which layer refused, the outcome to count. For a grab (grab true) of an activity
// admitted directly, a gate that checks the user's rate itself (Limits.UserAtGate) is left
// that check: the rule comes back as the caller's rate, for the grab to carry.
func (s *Server) edge(w http.ResponseWriter, r *http.Request, id string, retry, grab bool) (c caller, outcome string, err error) {
	if !retry && s.svc.SoldOut(id) {
		return c, outcomeSoldOutEdge, sale.ErrSoldOut
	}
	// An activity may set its own limits; it is known here once this node has read it.
	perIP, perUser, perAct := s.limits.PerIP, s.limits.PerUser, s.limits.PerActivity
	userKey := "user:"
	a, known := s.svc.Known(id)
	if !known && grab && s.limits.UserAtGate {
		// Whether the gate checks the user's rate depends on the activity: read it now (the grab
		// would, next), so that no node spends another bucket than the others for it.
		if act, err := s.svc.Activity(r.Context(), id); err == nil {
			a, known = act, true
		}
	}
	if known && a.Rates != (sale.Rates{}) {
		perIP = override(perIP, a.Rates.PerIP)
		perUser = override(perUser, a.Rates.PerUser)
		perAct = override(perAct, a.Rates.Global)
		userKey = "user:" + id + ":" // its own budget, apart from the node's
	}
	if grab && s.limits.UserAtGate && known && !a.Lined() && !perUser.Off() {
		c.rate = sale.UserRate{PerSecond: int64(perUser.PerSecond), Burst: int64(max(perUser.Burst, 1))}
		perUser = ratelimit.Rule{} // the gate's call checks it
	}
	c.ip = s.clientIP(r)
	if !perIP.Off() {
		if err := s.limit(w, r, s.limits.Windows, "ip:"+c.ip.String(), perIP); err != nil {
			return c, limitOutcome(err, "ip"), err
		}
	}
	if s.blocks != nil && s.blocks.IPBlocked(c.ip) {
		return c, "blocked_ip", sale.ErrBlocked
	}
	if c.user, c.token, err = s.authenticate(r); err != nil {
		return c, "", err
	}
	if s.blocks != nil && s.blocks.UserBlocked(c.user) {
		return c, "blocked_user", sale.ErrBlocked
	}
	if err := s.limit(w, r, s.limits.Local, "node:"+id, s.limits.PerNode); err != nil {
		return c, limitOutcome(err, "node"), err
	}
	if err := s.limit(w, r, s.limits.Buckets, userKey+c.user, perUser); err != nil {
		return c, limitOutcome(err, "user"), err
	}
	if err := s.limit(w, r, s.limits.Buckets, "act:"+id, perAct); err != nil {
		return c, limitOutcome(err, "activity"), err
	}
	return c, "", nil
}

// authenticate returns the user of the request's bearer token, and the token. Errors:
// sale.ErrUnauthorized.
func (s *Server) authenticate(r *http.Request) (user, token string, err error) {
	tok, ok := bearer(r)
	if !ok {
		return "", "", errNoBearer
	}
	user, err = s.tokens.Verify(tok)
	return user, tok, err
}

// bearer is the token of r's Authorization header, if it has one.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if len(h) < 7 || !strings.EqualFold(h[:7], "bearer ") {
		return "", false
	}
	tok := strings.TrimSpace(h[7:])
	return tok, tok != ""
}
