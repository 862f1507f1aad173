package node

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"seckill/internal/auth"
	"seckill/internal/capacity"
	"seckill/internal/httpapi"
	"seckill/internal/ratelimit"
	"seckill/internal/risk"
	"seckill/internal/sale"
	"seckill/internal/web"
)

// API is the HTTP layer's part of a node's Config: who may call (the node's user tokens, an
// identity provider's, the admin tokens), the grab's rate limits and risk rules.
type API struct {
	// JWTSecret signs and verifies the node's own user tokens (HS256, at least 32 bytes).
	JWTSecret string
	// IdentityProvider's tokens are accepted beside the node's own (JWKSURL empty: none).
	IdentityProvider auth.Provider
	// AdminToken is the operator token named "admin"; Admins are more admin tokens, each with
	// its name and role.
	AdminToken string
	Admins     []httpapi.Admin
	// DevLogin serves POST /api/login, where anyone is anyone (demo mode only).
	DevLogin bool
	// Rates are the grab endpoint's rate limits, per second (0: off).
	Rates Rates
	// TrustedProxies are the peers whose X-Forwarded-For names the client.
	TrustedProxies []netip.Prefix
	// Risk is the risk rules switched on, and the trained model.
	Risk Risk
}

// Rates are the grab endpoint's rate limits, requests per second (0: off): per user (a token
// bucket), per client IP (a sliding window), per activity across the nodes and per activity on
// this node (token buckets).
type Rates struct {
	User, IP, Global, Node int
}

// Risk is the risk rules a node runs and its trained model.
type Risk struct {
	// AccountsPerIP is the distinct users grabbing from one address within a minute above which
	// its grabs need a challenge (5 times as many: blocked); 0: off.
	AccountsPerIP int
	// Cadence challenges a user whose last 8 grabs came at a machine's regular beat.
	Cadence bool
	// MinSolve refuses a challenge answered faster; 0: off.
	MinSolve time.Duration
	// Model is the trained model's file ("": the rules alone), Networks the datacenter and proxy
	// networks' file, Record the file every grab's features are appended to.
	Model, Networks, Record string
	// ChallengeAt and BlockAt override the model file's thresholds (0: the file's); Shadow
	// scores and counts every grab while the rules decide.
	ChallengeAt, BlockAt float64
	Shadow               bool
}

// OpenRisk builds the risk engine of r: the rules switched on and, when configured, the trained
// model, the networks and the recorder, counting in windows (nil: the process's own memory).
// Errors name the setting whose file does not load. The engine's Close closes the recorder.
func OpenRisk(r Risk, windows risk.Windows) (*risk.Engine, error) {
	o := risk.Options{Rules: r.rules(), ModelPath: r.Model, ChallengeAt: r.ChallengeAt, BlockAt: r.BlockAt,
		Shadow: r.Shadow, Windows: windows}
	var nets *risk.Networks
	if r.Networks != "" {
		var err error
		if nets, err = risk.LoadNetworks(r.Networks); err != nil {
			return nil, fmt.Errorf("SECKILL_RISK_NETWORKS: %w", err)
		}
	}
	if r.Model != "" || r.Record != "" || nets != nil { // the rules alone keep none
		o.Features = risk.NewFeatures(risk.DefaultWindow, nets)
	}
	if r.Record != "" {
		rec, err := risk.OpenRecorder(r.Record)
		if err != nil {
			return nil, fmt.Errorf("SECKILL_RISK_RECORD: %w", err)
		}
		o.Recorder = rec
	}
	e, err := risk.Open(o)
	if err != nil {
		if o.Recorder != nil {
			o.Recorder.Close()
		}
		return nil, fmt.Errorf("SECKILL_RISK_MODEL: %w", err)
	}
	return e, nil
}

// rules are the rules of r switched on.
func (r Risk) rules() []risk.Rule {
	var rules []risk.Rule
	if r.AccountsPerIP > 0 {
		rules = append(rules, &risk.AccountsPerIP{ChallengeAbove: r.AccountsPerIP, BlockAt: 5 * r.AccountsPerIP, Window: time.Minute})
	}
	if r.Cadence {
		rules = append(rules, &risk.Cadence{Clicks: 8, Slowest: 5 * time.Second, Jitter: 0.05})
	}
	if r.MinSolve > 0 {
		rules = append(rules, risk.SolveTime{Fastest: r.MinSolve})
	}
	return rules
}

// watched says whether the risk engine reads files that may change, or writes one.
func (r Risk) watched() bool { return r.Model != "" || r.Networks != "" || r.Record != "" }

// openAPI builds the node's HTTP layer on its service: the tokens, the risk engine on the
// backend's windows (Redis's are every node's), the pages and the API with the binary's limits.
func (n *Node) openAPI() error {
	c := n.Config.API
	var idp *auth.Provider
	if c.IdentityProvider.JWKSURL != "" {
		p := c.IdentityProvider
		p.Log = n.Config.Log
		idp = &p
	}
	// The provider's key set is refreshed until the node closes.
	tokens, err := auth.Open(n.loops, auth.Config{Secret: []byte(c.JWTSecret), Now: n.Config.Now, Provider: idp})
	if err != nil {
		return err
	}
	if n.Risk, err = OpenRisk(c.Risk, n.RiskWindows); err != nil {
		return err
	}
	n.Risk.Observe = n.Metrics.Risk
	n.Metrics.WatchRiskModel(n.Risk.Status)
	pages, err := web.Handler()
	if err != nil {
		return fmt.Errorf("pages: %w", err)
	}
	n.API = httpapi.New(httpapi.Config{
		Service: n.Service, Features: n.Features, Tokens: tokens,
		AdminToken: c.AdminToken, Admins: c.Admins, DevLogin: c.DevLogin,
		Log: n.Config.Log, Health: n.Monitor, Observe: n.Metrics, Risk: n.Risk, Callback: n.pay.callback, Notices: n.pay.notices,
		Pages: pages, PagePatterns: web.Patterns,
		Ready: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, time.Second) // a hung dependency is not ready
			defer cancel()
			return n.Ping(ctx)
		},
		Limits: httpapi.Limits{
			PerIP:       ratelimit.Rule{PerSecond: c.Rates.IP},
			PerUser:     ratelimit.Rule{PerSecond: c.Rates.User, Burst: c.Rates.User},
			PerActivity: ratelimit.Rule{PerSecond: c.Rates.Global, Burst: c.Rates.Global},
			PerNode:     ratelimit.Rule{PerSecond: c.Rates.Node, Burst: c.Rates.Node},
			Windows:     n.Windows, Buckets: n.Buckets, UserAtGate: n.UserAtGate,
		},
		TrustedProxies: c.TrustedProxies,
		Plan:           PlanForecast, MinReplicas: n.Config.Replication.Replicas,
	})
	return nil
}

// PlanForecast sizes the deployment for a reservation sale's forecast peak on the project's
// measured costs (capacity.ForForecast).
func PlanForecast(f sale.Forecast, t httpapi.PlanTerms) (any, error) {
	return capacity.ForForecast(f, capacity.Sale{Cores: t.Cores, Headroom: t.Headroom, Drain: t.Drain, MinReplicas: t.MinReplicas})
}

// Handler is what the node serves on its API's port: the API and the pages, or on a worker
// node only /healthz and /readyz.
func (n *Node) Handler() http.Handler {
	if n.Config.Role != RoleWorker {
		return n.API
	}
	health := http.NewServeMux()
	health.Handle("GET /healthz", n.API)
	health.Handle("GET /readyz", n.API)
	return health
}

// riskEvery is how often a node looks for a new risk model or networks file, and writes out
// the risk recording.
const riskEvery = 2 * time.Second

// watchRisk reloads the risk model and networks files when they change, and flushes the
// recording, until ctx ends. A file that no longer loads is logged; the model before it runs on.
func watchRisk(ctx context.Context, e *risk.Engine, log *slog.Logger) {
	t := time.NewTicker(riskEvery)
	defer t.Stop()
	failed, stopped := "", false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		changed, err := e.Reload()
		switch {
		case err != nil && err.Error() != failed:
			failed = err.Error()
			log.Error("risk files: kept what was loaded before", "err", err, "model", e.Status().Version)
		case err == nil:
			failed = ""
		}
		if changed {
			st := e.Status()
			log.Info("risk model loaded", "version", st.Version, "features", st.Features, "shadow", st.Shadow)
		}
		if err := e.Flush(); err != nil && !stopped {
			stopped = true
			log.Error("risk recording stopped", "err", err)
		}
	}
}
