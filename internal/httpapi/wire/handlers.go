package wire

import (
	"seckill/internal/breaker"
	"seckill/internal/risk"
)

// ReadyResponse is /readyz's answer: ready or not (every dependency answers a ping), and the
// node's health level with each dependency's report.
type ReadyResponse struct {
	Status       string            `json:"status"` // ready, or unavailable
	Level        breaker.Level     `json:"level"`
	Dependencies []breaker.Report  `json:"dependencies"`
	RiskModel    *risk.ModelStatus `json:"risk_model,omitempty"`
	Error        *Error            `json:"error,omitempty"`
}

// LoginRequest is the body of POST /api/login.
type LoginRequest struct {
	User string `json:"user"`
}

// HealthResponse is /healthz's answer: the process is up.
type HealthResponse struct {
	Status string `json:"status"` // ok
}

// TimeResponse is GET /api/time: the node's clock, in Unix milliseconds.
type TimeResponse struct {
	NowMS int64 `json:"now_ms"`
}
