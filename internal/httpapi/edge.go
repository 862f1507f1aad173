package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"seckill/internal/health"
	"seckill/internal/ratelimit"
	"seckill/internal/risk"
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

// override applies an activity's own rate (sale.EffectiveRate) to the node's rule; the burst of a token
// bucket follows its rate (a window has none).
func override(node ratelimit.Rule, own int64) ratelimit.Rule {
	if own == 0 {
		return node
	}
	r := int(sale.EffectiveRate(own, int64(node.PerSecond)))
	return ratelimit.Rule{PerSecond: r, Burst: r}
}

// vet asks the risk engine about a grab that passed the edge, with what its page measured: a
// blocked one is refused, and one the engine wants challenged must carry a pass (which the gate
// then checks). A decision of the trained model is logged with the features that moved it
// most, so that an operator can see why (the client is not told): a line a second of each kind
// at most (riskLog), with the number of its kind left out since the line before. A degraded
// node skips the engine, its rules and its model: the blacklist and the token are its whole
// defence, as the design documents have it. Windows shared by the nodes (on Redis) that cannot count the grab
// make it BUSY, as a rate limit that cannot be checked does: fail closed.
func (s *Server) vet(r *http.Request, id, user, pass string, page *risk.Page) (outcome string, err error) {
	if s.risk == nil || s.health.Level() == health.Degraded {
		return "", nil
	}
	ip, now := s.clientIP(r), s.svc.Now()
	sig := risk.Signal{IP: ip, User: user, Activity: id, At: now, Page: page}
	if s.risk.Features() { // the rules alone read no claims
		sig.Claims = s.claims(r, now)
	}
	v, err := s.risk.Grab(r.Context(), sig)
	if err != nil {
		return "", busy(err)
	}
	if v.Scored && v.ModelDecision != risk.Allow {
		if ok, suppressed := s.riskLog.take(v, now); ok {
			s.log.InfoContext(r.Context(), "risk model", "decision", v.ModelDecision.String(), "shadow", v.Shadow,
				"score", v.Score, "model", v.Version, "top", v.TopFeatures(), "user", user, "ip", ip.String(), "activity", id,
				"suppressed", suppressed)
		}
	}
	by := "the risk rule " + v.Rule
	if v.Rule == "model" { // why stays in the log: a client told which features weigh learns to fake them
		by = "the risk model"
	}
	switch {
	case v.Decision == risk.Block:
		return "risk_block", fmt.Errorf("%w: refused by %s", sale.ErrBlocked, by)
	case v.Decision == risk.Challenge && pass == "":
		return "risk_challenge", fmt.Errorf("%w: %s asks for a challenge", sale.ErrChallengeRequired, by)
	}
	return "", nil
}

// riskLogEvery is how often, at most, a line is logged of the risk model's challenges, and of
// its blocks, in each mode.
const riskLogEvery = time.Second

// riskLog samples the log lines of the risk model's decisions: under a bot flood a line per
// refusal would be the node's whole log. It lets one line through per riskLogEvery for each
// decision (challenge, block) and mode (enforce, shadow), and counts the others, which the next
// line of its kind reports as "suppressed". The metrics count every decision.
type riskLog struct {
	kinds [2][2]sampled // [shadow][decision: challenge, block]
}

type sampled struct {
	next       atomic.Int64 // Unix ns from which the next line may be written
	suppressed atomic.Int64 // the decisions not logged since the last line
}

// take reports whether the decision of v, at now, is logged, and how many of its kind were not
// since the last line that was.
func (l *riskLog) take(v risk.Verdict, now time.Time) (ok bool, suppressed int64) {
	shadow, d := 0, 0
	if v.Shadow {
		shadow = 1
	}
	if v.ModelDecision == risk.Block {
		d = 1
	}
	k := &l.kinds[shadow][d]
	next, t := k.next.Load(), now.UnixNano()
	early := t < next && next-t <= int64(riskLogEvery) // (a clock set back by more starts again)
	if early || !k.next.CompareAndSwap(next, t+int64(riskLogEvery)) {
		k.suppressed.Add(1)
		return false, 0
	}
	return true, k.suppressed.Swap(0)
}

// busy is err as a BUSY answer (503): a dependency the check needs failed.
func busy(err error) error {
	if errors.Is(err, sale.ErrBusy) {
		return err
	}
	return fmt.Errorf("%w: %v", sale.ErrBusy, err)
}

// claims are what the identity provider's token of r says of the account, for the risk model.
// The token was verified by the edge: this is a lookup in the tokens' memory.
func (s *Server) claims(r *http.Request, now time.Time) risk.Claims {
	tok, ok := bearer(r)
	if !ok {
		return risk.Claims{}
	}
	id, err := s.tokens.Identify(tok)
	if err != nil || id.Created.IsZero() && !id.HasTrust {
		return risk.Claims{}
	}
	c := risk.Claims{Known: true, Trust: id.Trust}
	if !id.Created.IsZero() {
		c.AccountAge = max(0, now.Sub(id.Created))
	}
	return c
}

// edge runs the layers in front of the gate for a request about activity id, cheapest first:
// the local sold-out flag (unless retry, a request that may be owed an earlier answer), the
// client IP's rate limit and block, the user's token and block, the activity's limit on this
// node (in memory), the user's and the activity's rate limits (on Redis in the distributed
// mode). It returns the user, or the error to answer with and, when the error alone does
// not say which layer refused, the outcome to count. For a grab (grab true) of an activity
// admitted directly, a gate that checks the user's rate itself (Limits.UserAtGate) is left
// that check: the rule comes back as rate, for the grab to carry.
func (s *Server) edge(w http.ResponseWriter, r *http.Request, id string, retry, grab bool) (user string, rate sale.UserRate, outcome string, err error) {
	if !retry && s.svc.SoldOut(id) {
		return "", rate, "sold_out_edge", sale.ErrSoldOut
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
		rate = sale.UserRate{PerSecond: int64(perUser.PerSecond), Burst: int64(max(perUser.Burst, 1))}
		perUser = ratelimit.Rule{} // the gate's call checks it
	}
	ip := s.clientIP(r)
	if !perIP.Off() {
		if err := s.limit(w, r, s.limits.Windows, "ip:"+ip.String(), perIP); err != nil {
			return "", rate, limitOutcome(err, "ip"), err
		}
	}
	if s.blocks != nil && s.blocks.IPBlocked(ip) {
		return "", rate, "blocked_ip", sale.ErrBlocked
	}
	if user, err = s.authenticate(r); err != nil {
		return "", rate, "", err
	}
	if s.blocks != nil && s.blocks.UserBlocked(user) {
		return "", rate, "blocked_user", sale.ErrBlocked
	}
	if err := s.limit(w, r, s.limits.Local, "node:"+id, s.limits.PerNode); err != nil {
		return "", rate, limitOutcome(err, "node"), err
	}
	if err := s.limit(w, r, s.limits.Buckets, userKey+user, perUser); err != nil {
		return "", rate, limitOutcome(err, "user"), err
	}
	if err := s.limit(w, r, s.limits.Buckets, "act:"+id, perAct); err != nil {
		return "", rate, limitOutcome(err, "activity"), err
	}
	return user, rate, "", nil
}

// authenticate returns the user of the request's bearer token. Errors: sale.ErrUnauthorized.
func (s *Server) authenticate(r *http.Request) (string, error) {
	tok, ok := bearer(r)
	if !ok {
		return "", errNoBearer
	}
	return s.tokens.Verify(tok)
}

func outcomeOr(outcome string, err error) string {
	if outcome != "" {
		return outcome
	}
	return outcomeOf(err)
}
