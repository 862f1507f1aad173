package httpapi

import (
	"net/http"
	"time"

	"seckill/internal/httpapi/wire"
	"seckill/internal/sale"
)

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, wire.HealthResponse{Status: "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	h := s.health.Status()
	resp := wire.ReadyResponse{Status: "ready", Level: h.Level, Dependencies: h.Dependencies}
	if st := s.risk.Status(); st.Path != "" { // a model that fails to load does not make the node unready
		resp.RiskModel = &st
	}
	if err := s.ready(r.Context()); err != nil {
		s.log.WarnContext(r.Context(), "not ready", "err", err)
		resp.Status, resp.Error = "unavailable", &wire.Error{Code: wire.CodeBusy, Message: err.Error()}
		w.Header()["Retry-After"] = retryAfter
		writeJSON(w, http.StatusServiceUnavailable, resp)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) time(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, wire.TimeResponse{NowMS: s.svc.Now().UnixMilli()})
}

type loginResponse struct {
	Token     string    `json:"token"`
	User      string    `json:"user"`
	ExpiresAt time.Time `json:"expires_at"`
}

// login is the demo mode's login: anyone can be anyone. Deployments with a real JWT secret
// don't serve it unless SECKILL_DEMO=1.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if !s.devLogin {
		s.writeError(w, r, sale.ErrNotFound)
		return
	}
	var req wire.LoginRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	now := s.svc.Now()
	tok, err := s.tokens.Mint(req.User, now, LoginTTL)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, loginResponse{Token: tok, User: req.User, ExpiresAt: now.Add(LoginTTL).UTC()})
}
