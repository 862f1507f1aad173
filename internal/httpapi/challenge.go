package httpapi

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"time"

	"seckill/internal/breaker"
	"seckill/internal/captcha"
	"seckill/internal/httpapi/wire"
	"seckill/internal/risk"
	"seckill/internal/sale"
)

// challengeEdge runs a challenge request through the same edge as a grab (a sold-out, blocked or
// rate-limited client gets no challenge either) and returns its user; ok is false when it has
// answered the refusal.
func (s *Server) challengeEdge(w http.ResponseWriter, r *http.Request, id string) (user string, ok bool) {
	c, outcome, err := s.edge(w, r, id, false, false)
	if err != nil {
		s.refuseChallenge(w, r, outcome, err)
		return "", false
	}
	return c.user, true
}

// refuseChallenge answers err to a challenge request and counts it (as outcome if set).
func (s *Server) refuseChallenge(w http.ResponseWriter, r *http.Request, outcome string, err error) {
	s.observe.Challenge(outcomeOr(outcome, err))
	s.writeError(w, r, err)
}

// challenge puts a question to the user.
func (s *Server) challenge(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	user, ok := s.challengeEdge(w, r, id)
	if !ok {
		return
	}
	if err := decodeEmpty(w, r, &struct{}{}); err != nil {
		s.refuseChallenge(w, r, "", err)
		return
	}
	c, err := s.challenges.Challenge(r.Context(), id, user)
	if err != nil {
		s.refuseChallenge(w, r, "", err)
		return
	}
	img, err := captcha.PNG(c.Question)
	if err != nil {
		s.writeError(w, r, fmt.Errorf("draw challenge: %w", err))
		return
	}
	s.observe.Challenge("issued")
	writeJSON(w, http.StatusCreated, wire.ChallengeResponse{ChallengeID: c.ID,
		Image: "data:image/png;base64," + base64.StdEncoding.EncodeToString(img), ExpiresAt: c.IssuedAt.Add(sale.ChallengeTTL)})
}

// answer checks an answer and, when it is right, reveals the grab path.
func (s *Server) answer(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	user, ok := s.challengeEdge(w, r, id)
	if !ok {
		return
	}
	var req wire.AnswerRequest
	if err := decode(r, &req); err != nil {
		s.refuseChallenge(w, r, "", err)
		return
	}
	if req.ChallengeID == "" || req.Answer == nil {
		s.refuseChallenge(w, r, "", fmt.Errorf("%w: challenge_id and answer are required", sale.ErrInvalid))
		return
	}
	ip := s.clientIP(r)
	p, err := s.challenges.Answer(r.Context(), id, user, req.ChallengeID, *req.Answer, func(solve time.Duration) error {
		if s.risk == nil || s.health.Level() == breaker.Degraded {
			return nil
		}
		v, err := s.risk.Answer(r.Context(), risk.Signal{IP: ip, User: user, Activity: id, At: s.svc.Now(), Solve: solve})
		if err != nil {
			return busy(err)
		}
		if v.Decision == risk.Block {
			return fmt.Errorf("%w: answered in %v, faster than a person reads the picture (rule %s)", sale.ErrChallengeFailed,
				solve.Round(time.Millisecond), v.Rule)
		}
		return nil
	})
	if err != nil {
		s.refuseChallenge(w, r, "", err)
		return
	}
	s.observe.Challenge("solved")
	writeJSON(w, http.StatusOK, wire.PassResponse{PathToken: p.Token, ExpiresAt: p.ExpiresAt,
		GrabPath: "/api/activities/" + id + "/grab/" + p.Token})
}
