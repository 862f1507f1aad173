package httpapi

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"seckill/internal/breaker"
	"seckill/internal/risk"
	"seckill/internal/sale"
)

// vet asks the risk engine about a grab that passed the edge, with what its page measured: a
// blocked one is refused, and one the engine wants challenged must carry a pass (which the gate
// then checks). A decision of the trained model is logged with the features that moved it
// most, so that an operator can see why (the client is not told): a line a second of each kind
// at most (riskLog), with the number of its kind left out since the line before. A degraded
// node skips the engine, its rules and its model: the blacklist and the token are its whole
// defence, as the design documents have it. Windows shared by the nodes (on Redis) that cannot
// count the grab make it BUSY, as a rate limit that cannot be checked does: fail closed. The
// caller c is the edge's: its address and token are read once per grab.
func (s *Server) vet(r *http.Request, id string, c caller, pass string, page *risk.Page) (outcome string, err error) {
	if s.risk == nil || s.health.Level() == breaker.Degraded {
		return "", nil
	}
	now := s.svc.Now()
	sig := risk.Signal{IP: c.ip, User: c.user, Activity: id, At: now, Page: page}
	if s.risk.Features() { // the rules alone read no claims
		sig.Claims = s.claims(c.token, now)
	}
	v, err := s.risk.Grab(r.Context(), sig)
	if err != nil {
		return "", busy(err)
	}
	if v.Scored && v.ModelDecision != risk.Allow {
		if ok, suppressed := s.riskLog.take(v, now); ok {
			s.log.InfoContext(r.Context(), "risk model", "decision", v.ModelDecision.String(), "shadow", v.Shadow,
				"score", v.Score, "model", v.Version, "top", v.TopFeatures(), "user", c.user, "ip", c.ip.String(), "activity", id,
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

// claims are what the identity provider's token tok says of the account, for the risk model.
// The token was verified by the edge: this is a lookup in the tokens' memory.
func (s *Server) claims(tok string, now time.Time) risk.Claims {
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
