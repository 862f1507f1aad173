package main

import (
	"encoding/json"
	"io"

	"seckill/internal/node"
)

// checkCmd reads serve's configuration as serve would (flags, SECKILL_* variables, OTEL_*),
// refusing what serve refuses (a SECKILL_* variable it does not read among them), and prints
// what the node would run as, secrets left out: a deployment's configuration can be checked
// before it is rolled out, and deploy/'s tests check theirs so.
func checkCmd(args []string, env map[string]string, stdout, stderr io.Writer) error {
	c, err := parseServe(args, env, stderr)
	if err != nil {
		return err
	}
	proxies := make([]string, len(c.API.TrustedProxies))
	for i, p := range c.API.TrustedProxies {
		proxies[i] = p.String()
	}
	if err := c.Payments.Check(); err != nil { // the providers' settings, their key files read
		return err
	}
	quiet := c.API.Risk
	quiet.Record = "" // check writes nothing
	risky, err := node.OpenRisk(quiet, nil)
	if err != nil {
		return err
	}
	nets := 0
	if n := risky.Networks(); n != nil {
		nets = n.Len()
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(checked{Role: c.Role, Addr: c.addr, MetricsAddr: c.metricsAddr, DB: redactDSN(c.DB), Redis: redactDSN(c.Redis), Demo: c.demo,
		TrustedProxies: proxies, MinReplicas: c.Replication.Replicas, Tracing: c.tracing, IdentityProvider: c.API.IdentityProvider.JWKSURL != "",
		Admins: len(c.API.Admins), Webhooks: c.Webhooks, PaymentURL: c.Payments.CheckoutURL, PaymentProviders: c.Payments.Providers, ShutdownGraceS: shutdownGrace.Seconds(), FailoverGraceS: c.GateLimits.FailoverGrace.Seconds(),
		RiskModel: risky.Status().Version, RiskShadow: c.API.Risk.Shadow, RiskNetworks: nets, RiskRecord: c.API.Risk.Record})
}

// checked is what seckill check prints.
type checked struct {
	Role             string   `json:"role"`
	Addr             string   `json:"addr"`
	MetricsAddr      string   `json:"metrics_addr"` // where /metrics is served, apart from Addr
	DB               string   `json:"db"`
	Redis            string   `json:"redis"`
	Demo             bool     `json:"demo"`
	TrustedProxies   []string `json:"trusted_proxies"`
	MinReplicas      int      `json:"redis_min_replicas"`
	Tracing          bool     `json:"tracing"`
	IdentityProvider bool     `json:"identity_provider"`
	Admins           int      `json:"named_admins"`
	Webhooks         []string `json:"webhooks"` // the receivers of the order events
	// PaymentURL is the signed payment provider's checkout page, and PaymentProviders the
	// providers the buyers pay at (none: the pay call pays).
	PaymentURL       string   `json:"payment_url"`
	PaymentProviders []string `json:"payment_providers"`
	// ShutdownGraceS is how long a stopping node drains; FailoverGraceS how long a dependency
	// may refuse before it counts as down.
	ShutdownGraceS float64 `json:"shutdown_grace_s"`
	FailoverGraceS float64 `json:"failover_grace_s"`
	// RiskModel is the version of the trained risk model ("": the rules alone); RiskNetworks
	// the networks its datacenter list holds; RiskRecord where grabs' features are recorded.
	RiskModel    string `json:"risk_model"`
	RiskShadow   bool   `json:"risk_shadow"`
	RiskNetworks int    `json:"risk_networks"`
	RiskRecord   string `json:"risk_record"`
}
