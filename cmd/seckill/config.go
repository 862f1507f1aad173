package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"seckill/internal/alipay"
	"seckill/internal/breaker"
	"seckill/internal/httpapi"
	"seckill/internal/kafka"
	"seckill/internal/sale"
	"seckill/internal/signature"
	"seckill/internal/sqlstore"
	"seckill/internal/webhook"
	"seckill/internal/wechatpay"

	"seckill/internal/node"
)

// config is what `seckill serve` runs with: the node's Config (internal/node builds the node,
// its HTTP API included, from it), and what the process takes besides: its listeners, its log,
// the demo and the traces.
type config struct {
	node.Config
	addr     string
	demo     bool
	logLevel slog.Level
	// ready, when set, is told the base URL once the server listens (bench's in-process server).
	ready       func(base string)
	pprofAddr   string // where to serve net/http/pprof; empty: nowhere
	metricsAddr string // where to serve /metrics, apart from the API, which the public reaches
	// tracing says the OTEL_* variables ask for traces (telemetry.go).
	tracing bool
	// labClock serves the lab clock's route (SECKILL_LAB_CLOCK, labclock.go).
	labClock bool
}

// setting is one line of serve's configuration: a flag, the environment variable that gives its
// default, the default when neither is set, the help, and how its text lands in a config. The
// table below is the one list of serve's settings: the flags, their environment variables and
// docs/operating.md's configuration table are all checked against it.
type setting struct {
	flag, env, def, help string
	set                  func(c *config, v string) error
}

// demoAuto is SECKILL_DEMO unset: demo mode is on only for a node with no deployment setting
// (config.deployment).
const demoAuto = ""

// settings is serve's configuration table, bound to c.
func settings(c *config) []setting {
	return []setting{
		{"addr", "SECKILL_ADDR", "127.0.0.1:8080", "listen `address`", text(&c.addr)},
		{"metrics-addr", "SECKILL_METRICS_ADDR", defaultMetricsAddr, "`address` of the listener of its own that serves /metrics (never the API's port): loopback, or the pod's port only Prometheus reaches",
			address(&c.metricsAddr)},
		{"db", "SECKILL_DB", "sqlite:./data/seckill.db", "database: sqlite:PATH, mysql://... or postgres://...", text(&c.DB)},
		{"db-conns", "SECKILL_DB_CONNS", strconv.Itoa(sqlstore.DefaultConns), "connections the node keeps to a MariaDB/MySQL or PostgreSQL database at most (SQLite: one writer and its readers)",
			func(c *config, v string) error {
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 || n > sqlstore.MaxConns {
					return fmt.Errorf("want a number of connections from 1 to %d", sqlstore.MaxConns)
				}
				c.DBConns = n
				return nil
			}},
		{"redis", "SECKILL_REDIS", "", "Redis URL or cluster seeds; empty = embedded stock gate", text(&c.Redis)},
		{"jwt-secret", "SECKILL_JWT_SECRET", "", "HS256 `secret` of user tokens, >= 32 bytes; random when empty", text(&c.API.JWTSecret)},
		{"jwks-url", "SECKILL_JWKS_URL", "", "an identity provider's JWK Set `URL` (its jwks_uri): its RS256, ES256 and EdDSA tokens are accepted besides the HS256 ones; empty: none",
			func(c *config, v string) error {
				if u, err := url.Parse(v); v != "" && (err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "") {
					return errors.New("want an https:// URL (http:// for a provider on this machine)")
				}
				c.API.IdentityProvider.JWKSURL = v
				return nil
			}},
		{"jwt-issuer", "SECKILL_JWT_ISSUER", "", "the identity provider's tokens must carry this iss; empty: not checked", text(&c.API.IdentityProvider.Issuer)},
		{"jwt-audience", "SECKILL_JWT_AUDIENCE", "", "the identity provider's tokens must name this audience (aud); empty: not checked", text(&c.API.IdentityProvider.Audience)},
		{"jwt-user-claim", "SECKILL_JWT_USER_CLAIM", "sub", "the claim of the identity provider's tokens that names the user", func(c *config, v string) error {
			if v == "" || len(v) > 64 {
				return errors.New("want a claim name such as sub")
			}
			c.API.IdentityProvider.UserClaim = v
			return nil
		}},
		{"jwt-created-claim", "SECKILL_JWT_CREATED_CLAIM", "", "the claim of the identity provider's tokens that says when the account was created (a NumericDate or RFC 3339), a feature of the risk model; empty: not read", claimName(&c.API.IdentityProvider.CreatedClaim)},
		{"jwt-trust-claim", "SECKILL_JWT_TRUST_CLAIM", "", "the claim of the identity provider's tokens that holds its trust level for the account (a number), a feature of the risk model; empty: not read", claimName(&c.API.IdentityProvider.TrustClaim)},
		{"admin-token", "SECKILL_ADMIN_TOKEN", "", "bearer `token` for /api/admin; random when empty", text(&c.API.AdminToken)},
		{"admin-tokens", "SECKILL_ADMIN_TOKENS", "", "more admin tokens, comma-separated `name:role:token` (role viewer: reads only; operator: everything), each named in the audit log",
			func(c *config, v string) (err error) { c.API.Admins, err = parseAdmins(v); return err }},
		{"demo", "SECKILL_DEMO", demoAuto, "1: seed a demo activity and serve POST /api/login (anyone can sign in as anyone); default on only without any deployment setting (a JWT secret, an identity provider, an admin token, Redis, a database other than SQLite, a payment provider, webhooks, Kafka, trusted proxies)",
			func(c *config, v string) error {
				switch v {
				case demoAuto, "1", "true", "on", "0", "false", "off":
					c.demo = v == "1" || v == "true" || v == "on"
					return nil
				}
				return errors.New("want 1 or 0")
			}},
		{"log-level", "SECKILL_LOG_LEVEL", "info", "debug, info, warn or error", func(c *config, v string) error {
			if err := c.logLevel.UnmarshalText([]byte(v)); err != nil {
				return errors.New("want a log level: debug, info, warn or error")
			}
			return nil
		}},
		{"role", "SECKILL_ROLE", node.RoleAll, "all, api or worker; api and worker need Redis", func(c *config, v string) error {
			if v != node.RoleAll && v != node.RoleAPI && v != node.RoleWorker {
				return errors.New("want all, api or worker")
			}
			c.Role = v
			return nil
		}},
		{"claim-idle", "SECKILL_CLAIM_IDLE", "30s", "how long a grab stays with a worker that does not acknowledge it before another worker takes it over; Redis only",
			positive("30s", &c.ClaimIdle)},
		{"sweep-every", "SECKILL_SWEEP_EVERY", "1s", "how often expired payment windows are closed", positive("1s", &c.SweepEvery)},
		{"rate-user", "SECKILL_RATE_USER", "5", "grab requests per second per user, token bucket (0: off; on Redis each activity keeps its own, checked by the grab's script)", rate(&c.API.Rates.User)},
		{"rate-ip", "SECKILL_RATE_IP", "0", "grab requests per second per client IP, sliding window (0: off; enable when clients reach the service directly, not through NAT or a CDN)",
			rate(&c.API.Rates.IP)},
		{"rate-global", "SECKILL_RATE_GLOBAL", "0", "grab requests per second per activity across the cluster, token bucket (0: off; set to about 75% of measured capacity)",
			rate(&c.API.Rates.Global)},
		{"rate-node", "SECKILL_RATE_NODE", "0", "grab requests per second per activity on this node, token bucket in memory (0: off; the front of the global limit that costs Redis nothing: the global rate divided by the API nodes, as seckill plan prints it)",
			rate(&c.API.Rates.Node)},
		{"webhook-url", "SECKILL_WEBHOOK_URL", "", "comma-separated `URLs` that every order event is posted to, signed (Seckill-Signature), at least once and in order per order; empty: no events",
			func(c *config, v string) (err error) { c.Webhooks, err = parseWebhooks(v); return err }},
		{"webhook-secret", "SECKILL_WEBHOOK_SECRET", "", "the HMAC-SHA256 `secret` (>= 16 bytes) the webhook posts are signed with; required with SECKILL_WEBHOOK_URL",
			text(&c.WebhookSecret)},
		{"payment-providers", "SECKILL_PAYMENT_PROVIDERS", "", "comma-separated payment `providers` the buyers pay at, the default first: signed (the generic signed callback), stripe, alipay, wechatpay; empty: signed when SECKILL_PAYMENT_SECRET is set, else none, and the pay call pays",
			func(c *config, v string) error { c.Payments.Providers = splitList(v); return nil }},
		{"public-url", "SECKILL_PUBLIC_URL", "", "the node's public base `URL` (https://shop.example): the providers' notify URLs are its /api/payments/{provider}, and the buyers come back to its activity pages; required with stripe, alipay or wechatpay",
			text(&c.Payments.PublicURL)},
		{"pay-return-url", "SECKILL_PAY_RETURN_URL", "", "where a payment provider sends the buyer back (`URL`); empty: the activity's page on SECKILL_PUBLIC_URL",
			text(&c.Payments.ReturnURL)},
		{"payment-secret", "SECKILL_PAYMENT_SECRET", "", "the HMAC-SHA256 `secret` (>= 16 bytes) the signed provider signs its callbacks (POST /api/payments/callback) with; set, the pay call starts a payment at the provider and only its callback pays the order",
			text(&c.Payments.Secret)},
		{"payment-url", "SECKILL_PAYMENT_URL", "", "the signed provider's checkout `URL` the pay call sends the buyer to (payment_id, order_token and amount_cents added to its query, and sig, their HMAC with SECKILL_PAYMENT_SECRET, which the provider checks); required with SECKILL_PAYMENT_SECRET",
			text(&c.Payments.CheckoutURL)},
		{"stripe-secret-key", "SECKILL_STRIPE_SECRET_KEY", "", "the Stripe account's secret `key` (sk_live_..., sk_test_...); required with stripe", text(&c.Payments.Stripe.SecretKey)},
		{"stripe-webhook-secret", "SECKILL_STRIPE_WEBHOOK_SECRET", "", "the signing `secret` (whsec_...) of the Stripe webhook endpoint POST /api/payments/stripe; required with stripe",
			text(&c.Payments.Stripe.WebhookSecret)},
		{"stripe-api-url", "SECKILL_STRIPE_API_URL", "", "Stripe's API base `URL`; empty: Stripe's own (https://api.stripe.com)", text(&c.Payments.Stripe.APIURL)},
		{"stripe-currency", "SECKILL_STRIPE_CURRENCY", "usd", "the `currency` (ISO 4217, lower case) of an activity at Stripe when it names none", text(&c.Payments.Stripe.Currency)},
		{"alipay-app-id", "SECKILL_ALIPAY_APP_ID", "", "the Alipay app's `id`; required with alipay", text(&c.Payments.Alipay.AppID)},
		{"alipay-private-key", "SECKILL_ALIPAY_PRIVATE_KEY", "", "the PEM `file` of the Alipay app's RSA private key, which signs what the node sends; required with alipay",
			text(&c.Payments.Alipay.PrivateKey)},
		{"alipay-public-key", "SECKILL_ALIPAY_PUBLIC_KEY", "", "the PEM `file` of Alipay's RSA public key, which checks its notices and answers; required with alipay",
			text(&c.Payments.Alipay.PublicKey)},
		{"alipay-gateway", "SECKILL_ALIPAY_GATEWAY", "", "Alipay's gateway `URL`; empty: " + alipay.DefaultGateway, text(&c.Payments.Alipay.Gateway)},
		{"wechatpay-mch-id", "SECKILL_WECHATPAY_MCH_ID", "", "the WeChat Pay merchant's `id` (mchid); required with wechatpay", text(&c.Payments.WeChatPay.MchID)},
		{"wechatpay-app-id", "SECKILL_WECHATPAY_APP_ID", "", "the `appid` the merchant takes payments for; required with wechatpay", text(&c.Payments.WeChatPay.AppID)},
		{"wechatpay-serial", "SECKILL_WECHATPAY_SERIAL", "", "the `serial` of the merchant's API certificate; required with wechatpay", text(&c.Payments.WeChatPay.Serial)},
		{"wechatpay-private-key", "SECKILL_WECHATPAY_PRIVATE_KEY", "", "the PEM `file` of the merchant's private key (apiclient_key.pem), which signs what the node sends; required with wechatpay",
			text(&c.Payments.WeChatPay.PrivateKey)},
		{"wechatpay-platform-key", "SECKILL_WECHATPAY_PLATFORM_KEY", "", "the PEM `file` of WeChat Pay's public key (or its platform certificate), which checks its notices and answers; required with wechatpay",
			text(&c.Payments.WeChatPay.PlatformKey)},
		{"wechatpay-platform-serial", "SECKILL_WECHATPAY_PLATFORM_SERIAL", "", "the `id` of WeChat Pay's public key (PUB_KEY_ID_...) or its certificate's serial, as its Wechatpay-Serial header names it; required with wechatpay",
			text(&c.Payments.WeChatPay.PlatformSerial)},
		{"wechatpay-apiv3-key", "SECKILL_WECHATPAY_APIV3_KEY", "", "the merchant's API v3 `key` (32 bytes), which opens the notices; required with wechatpay",
			text(&c.Payments.WeChatPay.APIv3Key)},
		{"wechatpay-api-url", "SECKILL_WECHATPAY_API_URL", "", "WeChat Pay's API base `URL`; empty: " + wechatpay.DefaultAPI, text(&c.Payments.WeChatPay.APIURL)},
		{"kafka-brokers", "SECKILL_KAFKA_BROKERS", "", "comma-separated `host:port` seed brokers of a Kafka cluster every order event is produced to (idempotent producer, keyed by the order token); empty: none",
			func(c *config, v string) error { c.KafkaBrokers = splitList(v); return nil }},
		{"kafka-topic", "SECKILL_KAFKA_TOPIC", "seckill.orders", "the Kafka `topic` of the order events", text(&c.KafkaTopic)},
		{"trusted-proxies", "SECKILL_TRUSTED_PROXIES", "", "comma-separated `CIDRs` or addresses of proxies whose X-Forwarded-For is believed",
			func(c *config, v string) (err error) { c.API.TrustedProxies, err = parseProxies(v); return err }},
		{"slow-gate", "SECKILL_SLOW_GATE", "50ms", "mean latency of the stock gate (Redis, or the embedded journal) over 10 s above which the node is at level warning",
			positive("50ms", &c.GateLimits.SlowAfter)},
		{"slow-db", "SECKILL_SLOW_DB", "200ms", "mean latency of the database over 10 s above which the node is at level warning",
			positive("200ms", &c.DBLimits.SlowAfter)},
		{"fail-rate", "SECKILL_FAIL_RATE", "0.05", "error rate of a dependency over 10 s above which the node is at level degraded",
			func(c *config, v string) error {
				rate, err := strconv.ParseFloat(v, 64)
				if err != nil || !(rate > 0 && rate < 1) {
					return errors.New("want a fraction between 0 and 1 such as 0.05")
				}
				c.GateLimits.FailRate, c.DBLimits.FailRate = rate, rate
				return nil
			}},
		{"breaker-open", "SECKILL_BREAKER_OPEN", breaker.DefaultOpenFor.String(), "how long a tripped circuit breaker answers BUSY before it lets a probe through",
			positive("250ms", &c.GateLimits.OpenFor, &c.DBLimits.OpenFor)},
		{"failover-grace", "SECKILL_FAILOVER_GRACE", "20s", "Redis Cluster or Sentinel: how long a node may refuse connections, or a slot redirect, before it counts as down and opens the breaker; longer than a failover takes",
			positive("20s", &c.GateLimits.FailoverGrace)},
		{"redis-min-replicas", "SECKILL_REDIS_MIN_REPLICAS", "0", "acknowledge a grab, join, release or spent pass only once this many Redis replicas have it (WAIT); on timeout 503 BUSY; 0: Redis's asynchronous replication",
			count(&c.Replication.Replicas, 16, "a number of replicas from 0 to 16")},
		{"risk-accounts-per-ip", "SECKILL_RISK_ACCOUNTS_PER_IP", "0", "distinct users grabbing from one client IP within a minute above which its grabs need a challenge (5x: blocked); 0: off, as behind NAT or a CDN",
			count(&c.API.Risk.AccountsPerIP, 1_000_000, "a number of users, 0 for off")},
		{"risk-cadence", "SECKILL_RISK_CADENCE", "on", "on: a user whose last 8 grabs on this node came at a machine's regular beat must solve a challenge", switchOf(&c.API.Risk.Cadence)},
		{"risk-min-solve", "SECKILL_RISK_MIN_SOLVE", "1s", "a challenge answered faster than this is refused; 0: off",
			orOff(&c.API.Risk.MinSolve, 0, "a duration such as 1s, or 0 for off")},
		{"risk-model", "SECKILL_RISK_MODEL", "", "a trained risk model `file` (seckill risk train) that scores every grab and takes over from the rules above; read again when it changes; empty: the rules alone", text(&c.API.Risk.Model)},
		{"risk-challenge-at", "SECKILL_RISK_CHALLENGE_AT", "", "the model's score from which a grab needs a challenge; empty: the model file's (0.6 by default)", threshold(&c.API.Risk.ChallengeAt)},
		{"risk-block-at", "SECKILL_RISK_BLOCK_AT", "", "the model's score from which a grab is refused; empty: the model file's (0.9 by default)", threshold(&c.API.Risk.BlockAt)},
		{"risk-shadow", "SECKILL_RISK_SHADOW", "off", "on: the model scores and counts every grab (logs, metrics) and the rules decide", switchOf(&c.API.Risk.Shadow)},
		{"risk-networks", "SECKILL_RISK_NETWORKS", "", "a `file` of datacenter and proxy networks (CIDRs, one a line; see deploy/risk/networks.example.txt), a feature of the model; read again when it changes", text(&c.API.Risk.Networks)},
		{"risk-record", "SECKILL_RISK_RECORD", "", "a `file` every grab's risk features are appended to (JSON lines), to label (seckill risk label) and train a model on", text(&c.API.Risk.Record)},
		{"rank-exact-max", "SECKILL_RANK_EXACT_MAX", "1000000", "the most shares a red packet's leaderboard keeps exactly (a sorted set, ~130 B a member); beyond, a histogram of 8 KiB ranks within a stated bound",
			func(c *config, v string) error {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n < 0 || n > sale.MaxStock {
					return fmt.Errorf("want a number of shares from 0 to %d", sale.MaxStock)
				}
				c.RankExactMax = n
				return nil
			}},
		{"pprof", "SECKILL_PPROF", "", "`address` (loopback or an internal network) to serve Go's /debug/pprof profiles on; empty: off", text(&c.pprofAddr)},
		{"reconcile-every", "SECKILL_RECONCILE_EVERY", "1h", "how often one node compares every current activity's gate with the database, under a lease (0: off)",
			orOff(&c.ReconcileEvery, time.Second, "a duration of a second or more such as 1h, or 0 for off")},
		{"reconcile-repair", "SECKILL_RECONCILE_REPAIR", "off", "on: the scheduled reconciliation repairs the drift it finds; off: it reports it (log, metric, alert)",
			switchOf(&c.ReconcileRepair)},
		{"archive-after", "SECKILL_ARCHIVE_AFTER", "24h", "how long an activity's hot state (Redis keys, the process's memory) is kept once its sale and pay windows are over and its queue drained; then it is dropped and the database answers for it (0: kept for ever)",
			orOff(&c.ArchiveAfter, 0, "a duration such as 24h, or 0 to keep everything")},
		{"events-keep", "SECKILL_EVENTS_KEEP", "168h", "how long an order event is kept once every receiver it was written for has taken it (it can be replayed meanwhile); then one node deletes it and its deliveries. An event not yet taken everywhere, pending or parked, is kept whatever this says (0: kept for ever)",
			orOff(&c.EventsKeep, time.Second, "a duration of a second or more such as 168h, or 0 to keep every event")},
		{"remind-before", "SECKILL_REMIND_BEFORE", "5m", "how long before each wave of a reservation sale opens its reminder (activity.wave_opening) goes to the order events' receivers, once (0: no reminders)",
			orOff(&c.RemindBefore, time.Second, "a duration of a second or more such as 5m, or 0 for no reminders")},
		{"lab-clock", labClockEnv, "off", "on (a development build's, which bench sets on the nodes it starts; a release build refuses it): serve PUT /lab/clock on the metrics listener, which skews this node's clock while it runs, the nemesis's clock-skew strike",
			switchOf(&c.labClock)},
		{"lab-redis-via", labRedisViaEnv, "", "`routes` SERVER=VIA,... (a development build's, which bench sets on the nodes its nemesis starts; a release build refuses it): each Redis server named (host:port, as SECKILL_REDIS, the cluster's map or the sentinels name it) is dialled at VIA instead, a proxy the nemesis's bad networks strike",
			routes(&c.RedisVia)},
	}
}

// The lab's settings (labclock.go): named here, in every build, so that a release build can
// refuse them by name.
const (
	labClockEnv    = "SECKILL_LAB_CLOCK"
	labRedisViaEnv = "SECKILL_LAB_REDIS_VIA"
)

// defaultMetricsAddr is SECKILL_METRICS_ADDR's default: loopback, so that only this machine
// reads the metrics; not Prometheus's own 9090, which a local Prometheus (or deploy/compose's,
// published on the host) holds.
const defaultMetricsAddr = "127.0.0.1:9464"

// The parsers of the table's settings. Each error names the environment variable, the value and
// what is wanted: a flag and its variable take the same text.

func text(dst *string) func(*config, string) error {
	return func(_ *config, v string) error { *dst = v; return nil }
}

// address reads a listen address, host:port (the host may be empty: every interface).
func address(dst *string) func(*config, string) error {
	return func(_ *config, v string) error {
		_, port, err := net.SplitHostPort(v)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
			return errors.New("want a listen address host:port such as 127.0.0.1:9464")
		}
		*dst = v
		return nil
	}
}

// positive reads a duration above zero into every dst.
func positive(example string, dst ...*time.Duration) func(*config, string) error {
	return func(_ *config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("want a positive duration such as %s", example)
		}
		for _, p := range dst {
			*p = d
		}
		return nil
	}
}

// orOff reads a duration that is 0 (off) or at least least.
func orOff(dst *time.Duration, least time.Duration, want string) func(*config, string) error {
	return func(_ *config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > 0 && d < least {
			return fmt.Errorf("want %s", want)
		}
		*dst = d
		return nil
	}
}

// routes reads SERVER=VIA pairs of host:port, comma-separated, or nothing.
func routes(dst *map[string]string) func(*config, string) error {
	return func(_ *config, v string) error {
		if v == "" {
			*dst = nil
			return nil
		}
		m := map[string]string{}
		for pair := range strings.SplitSeq(v, ",") {
			server, via, ok := strings.Cut(pair, "=")
			if !ok || !hostPort(server) || !hostPort(via) {
				return fmt.Errorf("want SERVER=VIA,... of host:port each, such as 127.0.0.1:6379=127.0.0.1:41000; %q is not", pair)
			}
			if _, twice := m[server]; twice {
				return fmt.Errorf("want one route a server; %s has two", server)
			}
			m[server] = via
		}
		*dst = m
		return nil
	}
}

// hostPort reports whether v is a host (not empty) and a port number.
func hostPort(v string) bool {
	host, port, err := net.SplitHostPort(v)
	n, perr := strconv.Atoi(port)
	return err == nil && perr == nil && host != "" && n > 0 && n <= 65535
}

// count reads a whole number from 0 to most.
func count(dst *int, most int, want string) func(*config, string) error {
	return func(_ *config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > most {
			return fmt.Errorf("want %s", want)
		}
		*dst = n
		return nil
	}
}

// claimName reads the name of a token's claim, or nothing.
func claimName(dst *string) func(*config, string) error {
	return func(_ *config, v string) error {
		if len(v) > 64 {
			return errors.New("want a claim name of at most 64 characters, or nothing")
		}
		*dst = v
		return nil
	}
}

// threshold reads a score between 0 (excluded) and 1, or nothing.
func threshold(dst *float64) func(*config, string) error {
	return func(_ *config, v string) error {
		if v == "" {
			*dst = 0
			return nil
		}
		p, err := strconv.ParseFloat(v, 64)
		if err != nil || !(p > 0 && p <= 1) {
			return errors.New("want a score above 0 and at most 1 such as 0.6, or nothing for the model file's")
		}
		*dst = p
		return nil
	}
}

// rate reads a rate limit: requests per second, 0 for off.
func rate(dst *int) func(*config, string) error {
	return count(dst, maxRate, fmt.Sprintf("requests per second from 0 (off) to %d", maxRate))
}

func switchOf(dst *bool) func(*config, string) error {
	return func(_ *config, v string) (err error) { *dst, err = onOff(v); return err }
}

// maxRate bounds the rate limits' settings.
const maxRate = 10_000_000

// parseServe reads serve's flags, each defaulting to its SECKILL_* variable of env (the
// process's environment), and refuses a SECKILL_* variable that is none of them.
func parseServe(args []string, env map[string]string, stderr io.Writer) (config, error) {
	c := config{Config: node.Config{GateLimits: breaker.GateThresholds, DBLimits: breaker.DatabaseThresholds}}
	table := settings(&c)
	vals := make([]string, len(table))
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	for i, s := range table {
		def := s.def
		if v := env[s.env]; v != "" {
			def = v
		}
		fs.StringVar(&vals[i], s.flag, def, s.help+" ("+s.env+")")
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("serve: unexpected arguments %q", fs.Args())
	}
	if err := unknownSettings(env, table); err != nil {
		return c, err
	}
	for i, s := range table {
		if err := s.set(&c, vals[i]); err != nil {
			return c, fmt.Errorf("%s=%q (-%s): %w", s.env, vals[i], s.flag, err)
		}
	}
	var err error
	if c.tracing, err = tracingOf(func(k string) string { return env[k] }); err != nil {
		return c, err
	}
	if vals[indexOf(table, "demo")] == demoAuto {
		c.demo = c.deployment() == ""
	}
	if c.API.IdentityProvider.JWKSURL == "" && (c.API.IdentityProvider.Issuer != "" || c.API.IdentityProvider.Audience != "" || c.API.IdentityProvider.UserClaim != "sub" ||
		c.API.IdentityProvider.CreatedClaim != "" || c.API.IdentityProvider.TrustClaim != "") {
		return c, errors.New("SECKILL_JWT_ISSUER, SECKILL_JWT_AUDIENCE, SECKILL_JWT_USER_CLAIM, SECKILL_JWT_CREATED_CLAIM and SECKILL_JWT_TRUST_CLAIM are the identity provider's: they need SECKILL_JWKS_URL")
	}
	if c.Role != node.RoleAll && c.Redis == "" {
		return c, fmt.Errorf("SECKILL_ROLE=%s needs SECKILL_REDIS: the embedded queue lives inside its one process", c.Role)
	}
	for _, a := range c.API.Admins {
		if c.API.AdminToken != "" && a.Token == c.API.AdminToken {
			return c, fmt.Errorf("SECKILL_ADMIN_TOKENS: admin %q has SECKILL_ADMIN_TOKEN's token", a.Name)
		}
	}
	if len(c.Webhooks) > 0 {
		for _, u := range c.Webhooks {
			if _, err := webhook.New(u, []byte(c.WebhookSecret)); err != nil {
				return c, fmt.Errorf("SECKILL_WEBHOOK_URL, SECKILL_WEBHOOK_SECRET: %w", err)
			}
		}
	} else if c.WebhookSecret != "" {
		return c, errors.New("SECKILL_WEBHOOK_SECRET without SECKILL_WEBHOOK_URL: no receiver to sign for")
	}
	if err := checkProvider(c.Payments.CheckoutURL, c.Payments.Secret); err != nil {
		return c, err
	}
	if err := checkPayments(&c.Payments); err != nil {
		return c, err
	}
	if len(c.KafkaBrokers) > 0 {
		if err := kafka.Check(c.KafkaBrokers, c.KafkaTopic); err != nil {
			return c, fmt.Errorf("SECKILL_KAFKA_BROKERS, SECKILL_KAFKA_TOPIC: %w", err)
		}
	}
	if c.labClock && !labBuilt {
		return c, errors.New("SECKILL_LAB_CLOCK: a release build has no lab clock")
	}
	if len(c.RedisVia) > 0 && !labBuilt {
		return c, errors.New("SECKILL_LAB_REDIS_VIA: a release build has no lab routes")
	}
	if len(c.RedisVia) > 0 && c.Redis == "" {
		return c, errors.New("SECKILL_LAB_REDIS_VIA needs SECKILL_REDIS: the embedded gate dials no Redis")
	}
	if c.Replication.Replicas > 0 && c.Redis == "" {
		return c, errors.New("SECKILL_REDIS_MIN_REPLICAS needs SECKILL_REDIS: the embedded gate has no replicas")
	}
	if c.API.Risk.Model == "" && (c.API.Risk.ChallengeAt > 0 || c.API.Risk.BlockAt > 0 || c.API.Risk.Shadow) {
		return c, errors.New("SECKILL_RISK_CHALLENGE_AT, SECKILL_RISK_BLOCK_AT and SECKILL_RISK_SHADOW are the model's: they need SECKILL_RISK_MODEL")
	}
	return c, nil
}

// deployment names a setting of c that only a deployment has, "" when there is none: such a
// node never turns the demo login on by itself (SECKILL_DEMO=1 still does). The demo login lets
// anyone sign in as anyone; it is for `go run ./cmd/seckill` on a laptop, and a deployment whose
// SECKILL_JWT_SECRET was left out or misspelt must not fall back to it.
func (c config) deployment() string {
	switch {
	case c.API.JWTSecret != "":
		return "SECKILL_JWT_SECRET"
	case c.API.IdentityProvider.JWKSURL != "":
		return "SECKILL_JWKS_URL"
	case c.Redis != "":
		return "SECKILL_REDIS"
	case !strings.HasPrefix(c.DB, "sqlite:"): // a try-out may start on a fresh SQLite file
		return "SECKILL_DB"
	case c.API.AdminToken != "":
		return "SECKILL_ADMIN_TOKEN"
	case len(c.API.Admins) > 0:
		return "SECKILL_ADMIN_TOKENS"
	case c.Payments.CheckoutURL != "" || c.Payments.Secret != "":
		return "SECKILL_PAYMENT_URL, SECKILL_PAYMENT_SECRET"
	case len(c.Payments.Providers) > 0:
		return "SECKILL_PAYMENT_PROVIDERS"
	case len(c.Webhooks) > 0 || c.WebhookSecret != "":
		return "SECKILL_WEBHOOK_URL"
	case len(c.KafkaBrokers) > 0:
		return "SECKILL_KAFKA_BROKERS"
	case len(c.API.TrustedProxies) > 0:
		return "SECKILL_TRUSTED_PROXIES"
	}
	return ""
}

// unknownSettings refuses the SECKILL_* variables of env that are no setting of table: a
// misspelt one would be ignored, and the node would run on the default it was meant to replace
// (SECKILL_JWT_SECRT: a random secret, and with it the demo login). Each is named with the
// setting it is closest to, when one is close. serve and check both refuse them here.
func unknownSettings(env map[string]string, table []setting) error {
	known := map[string]bool{}
	for _, s := range table {
		known[s.env] = true
	}
	var unknown []string
	for k := range env {
		if strings.HasPrefix(k, "SECKILL_") && !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	for i, k := range unknown {
		unknown[i] = "unknown setting " + k
		if near := closestSetting(k, table); near != "" {
			unknown[i] += ": did you mean " + near + "?"
		}
	}
	return fmt.Errorf("%s (seckill serve -h lists the settings)", strings.Join(unknown, "; "))
}

// closestSetting is the variable of table that name is a typo of: the fewest edits away, and
// at most a third of its part after SECKILL_ (at least one); "" when none is that close.
func closestSetting(name string, table []setting) string {
	best, bestDist := "", max(1, (len(name)-len("SECKILL_"))/3)+1
	for _, s := range table {
		if d := editDistance(name, s.env); d < bestDist {
			best, bestDist = s.env, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b: the fewest characters inserted, deleted
// or replaced that turn one into the other.
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// indexOf is the place of the setting of flag name in table.
func indexOf(table []setting, name string) int {
	for i, s := range table {
		if s.flag == name {
			return i
		}
	}
	panic("no setting " + name)
}

// minAdminToken is the shortest named admin token accepted.
const minAdminToken = 16

// parseAdmins reads SECKILL_ADMIN_TOKENS: comma-separated name:role:token.
func parseAdmins(spec string) ([]httpapi.Admin, error) {
	var out []httpapi.Admin
	names, tokens := map[string]bool{"admin": true}, map[string]bool{}
	for _, f := range strings.Split(spec, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		name, rest, _ := strings.Cut(f, ":")
		role, token, _ := strings.Cut(rest, ":")
		switch {
		case !validAdminName(name):
			return nil, fmt.Errorf("admin %q: want a name of 1-32 letters, digits, '.', '_' or '-'", name)
		case names[name]:
			return nil, fmt.Errorf("admin %q named twice (admin is SECKILL_ADMIN_TOKEN's)", name)
		case role != string(httpapi.RoleViewer) && role != string(httpapi.RoleOperator):
			return nil, fmt.Errorf("admin %q: role %q, want viewer or operator", name, role)
		case len(token) < minAdminToken || strings.ContainsAny(token, " \t"):
			return nil, fmt.Errorf("admin %q: want a token of at least %d characters, without spaces", name, minAdminToken)
		case tokens[token]:
			return nil, fmt.Errorf("admin %q: a token given to another admin", name)
		}
		names[name], tokens[token] = true, true
		out = append(out, httpapi.Admin{Name: name, Role: httpapi.Role(role), Token: token})
	}
	return out, nil
}

func validAdminName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// checkProvider checks SECKILL_PAYMENT_URL and SECKILL_PAYMENT_SECRET: both or neither.
func checkProvider(rawURL, secret string) error {
	switch {
	case rawURL == "" && secret == "":
		return nil
	case secret == "":
		return errors.New("SECKILL_PAYMENT_URL without SECKILL_PAYMENT_SECRET: the provider's callbacks could not be checked")
	case len(secret) < 16:
		return errors.New("SECKILL_PAYMENT_SECRET: at least 16 bytes")
	case rawURL == "":
		return errors.New("SECKILL_PAYMENT_SECRET without SECKILL_PAYMENT_URL: the pay call would have nowhere to send the buyer")
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.Fragment != "" {
		return fmt.Errorf("SECKILL_PAYMENT_URL=%q: want http(s)://host/path[?query], no user, password or fragment", rawURL)
	}
	return nil
}

// checkPayments checks the payment settings beside the signed provider's: the providers named
// (signed by default when its secret is set), the public URL they need and the return URL. The
// providers' own settings (keys, ids) are checked when the node reads their files.
func checkPayments(p *node.Payments) error {
	if len(p.Providers) == 0 && p.Secret != "" {
		p.Providers = []string{signature.ProviderName}
	}
	for _, name := range p.Providers {
		if name == signature.ProviderName && p.Secret == "" {
			return errors.New("SECKILL_PAYMENT_PROVIDERS names signed: it needs SECKILL_PAYMENT_SECRET and SECKILL_PAYMENT_URL")
		}
	}
	if p.Secret != "" && !slices.Contains(p.Providers, signature.ProviderName) {
		return errors.New("SECKILL_PAYMENT_SECRET is the signed provider's: SECKILL_PAYMENT_PROVIDERS does not name it")
	}
	for _, u := range []struct{ env, v string }{{"SECKILL_PUBLIC_URL", p.PublicURL}, {"SECKILL_PAY_RETURN_URL", p.ReturnURL},
		{"SECKILL_STRIPE_API_URL", p.Stripe.APIURL}, {"SECKILL_ALIPAY_GATEWAY", p.Alipay.Gateway}, {"SECKILL_WECHATPAY_API_URL", p.WeChatPay.APIURL}} {
		if u.v == "" {
			continue
		}
		if pu, err := url.Parse(u.v); err != nil || pu.Host == "" || (pu.Scheme != "http" && pu.Scheme != "https") || pu.User != nil {
			return fmt.Errorf("%s=%q: want http(s)://host[/path], no user or password", u.env, u.v)
		}
	}
	return nil
}

// maxWebhooks bounds SECKILL_WEBHOOK_URL: each receiver is a delivery row per event.
const maxWebhooks = 8

// splitList reads a comma-separated list, its items trimmed, empty ones left out.
func splitList(v string) []string {
	var out []string
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// parseWebhooks reads SECKILL_WEBHOOK_URL: comma-separated receiver URLs, each once.
func parseWebhooks(v string) ([]string, error) {
	var out []string
	for _, u := range splitList(v) {
		if slices.Contains(out, u) {
			return nil, fmt.Errorf("%s twice", u)
		}
		out = append(out, u)
	}
	if len(out) > maxWebhooks {
		return nil, fmt.Errorf("%d receivers: at most %d", len(out), maxWebhooks)
	}
	return out, nil
}

// parseProxies reads SECKILL_TRUSTED_PROXIES: comma-separated CIDRs or single addresses.
func parseProxies(spec string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(spec, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				return nil, fmt.Errorf("%q is neither a CIDR nor an address", f)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// onOff reads a switch: on, 1 or true; off, 0 or false.
func onOff(val string) (bool, error) {
	switch val {
	case "on", "1", "true":
		return true, nil
	case "off", "0", "false":
		return false, nil
	}
	return false, errors.New("want on or off")
}
