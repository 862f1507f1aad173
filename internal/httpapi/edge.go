package httpapi

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"seckill/internal/ratelimit"
	"seckill/internal/sale"
)

// allow checks one rate limit and, when it refuses, answers 429 RATE_LIMITED with Retry-After
// (or 503 BUSY when the limiter cannot decide: fail closed). It reports whether to go on.
func (s *Server) allow(w http.ResponseWriter, r *http.Request, l ratelimit.Limiter, key string, rule ratelimit.Rule) bool {
	if rule.Off() {
		return true
	}
	d, err := l.Allow(r.Context(), key, rule)
	switch {
	case err != nil:
		s.writeError(w, r, fmt.Errorf("%w: %v", sale.ErrBusy, err))
		return false
	case !d.Allowed:
		w.Header().Set("Retry-After", ratelimit.RetryAfterSeconds(d.RetryAfter))
		s.writeError(w, r, sale.ErrRateLimited)
		return false
	}
	return true
}

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
