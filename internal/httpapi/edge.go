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
	}
	return "rate_limited_" + which
}

// outcomeOf names an error for the metrics: its stable code, in lower case.
func outcomeOf(err error) string {
	_, code := Classify(err)
	return strings.ToLower(code)
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
