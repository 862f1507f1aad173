package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"seckill/internal/auth"
	"seckill/internal/health"
	"seckill/internal/httpapi"
	"seckill/internal/memory"
	"seckill/internal/metrics"
	"seckill/internal/ratelimit"
	"seckill/internal/redisgate"
	"seckill/internal/risk"
	"seckill/internal/sale"
	"seckill/internal/sqlstore"
	"seckill/internal/web"
	"seckill/internal/worker"
)

const usage = `usage: seckill [serve|bench] [flags]

Commands:
  serve   run the API, stock gate, order worker and sweeper (the default)
  bench   send a flash crowd to a server (or to one it starts in process) and check the sale
  draw    recompute a verifiable draw from its revealed seed and the entries on stdin

Run 'seckill serve -h', 'seckill bench -h' or 'seckill draw -h' for the flags; serve's each have an environment
variable.
`

// run is the whole program: main only adds the process's signals, arguments and environment.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		cfg, err := parseServe(args, getenv, stderr)
		if err != nil {
			return err
		}
		return serve(ctx, cfg, stdout, stderr)
	case "bench":
		return benchCmd(ctx, args, getenv, stdout, stderr)
	case "draw":
		return drawCmd(args, os.Stdin, stdout, stderr)
	case "help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}

// config is what `seckill serve` runs with.
type config struct {
	addr       string
	db         string
	redis      string
	jwtSecret  string
	adminToken string
	demo       bool
	logLevel   slog.Level
	sweepEvery time.Duration
	role       string        // roleAll, roleAPI or roleWorker
	claimIdle  time.Duration // how long a stream entry stays with a silent worker before another takes it
	// replication is how many Redis replicas must have a write before it is acknowledged.
	replication redisgate.Replication
	// ready, when set, is told the base URL once the server listens (bench's in-process server).
	ready func(base string)
	// The grab endpoint's rate limits, requests per second (0: off), and the proxies whose
	// X-Forwarded-For is believed.
	rateUser, rateIP, rateGlobal int
	// gateLimits and dbLimits are the health thresholds and breaker settings of the stock
	// gate and of the database.
	gateLimits, dbLimits health.Thresholds
	// The risk rules: accounts per IP (0: off), regular cadence, fastest plausible solve (0: off).
	riskAccounts   int
	riskCadence    bool
	riskMinSolve   time.Duration
	trustedProxies []netip.Prefix
	pprofAddr      string // where to serve net/http/pprof; empty: nowhere
	rankExactMax   int64  // the most shares a red packet's leaderboard keeps exactly
	// The scheduled reconciliation: how often (0: off) and whether it repairs the drift it finds.
	reconcileEvery  time.Duration
	reconcileRepair bool
	// archiveAfter is how long an activity's hot state is kept after its pay windows close (0:
	// for ever).
	archiveAfter time.Duration
}

// maxRate bounds the rate limits' settings.
const maxRate = 10_000_000

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
				return nil, fmt.Errorf("SECKILL_TRUSTED_PROXIES: %q is neither a CIDR nor an address", f)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// The roles of a node. A distributed deployment may run API nodes and worker nodes apart, so that
// draining the queue never takes CPU from the crowd, and each kind scales (and fails) on its own.
const (
	roleAll    = "all"    // the HTTP API, the queue's worker and the payment-window sweeper
	roleAPI    = "api"    // the HTTP API only
	roleWorker = "worker" // the worker and the sweeper; HTTP only for /healthz, /readyz and /metrics
)

// parseServe reads the flags, each defaulting to its SECKILL_* environment variable.
func parseServe(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	var c config
	var demo, level, claimIdle, rateUser, rateIP, rateGlobal, proxies string
	var slowGate, slowDB, breakerOpen, failRate, failoverGrace string
	var riskAccounts, riskCadence, riskSolve, rankExact, minReplicas, reconcileEvery, reconcileRepair, archiveAfter string
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.addr, "addr", env("SECKILL_ADDR", "127.0.0.1:8080"), "listen `address` (SECKILL_ADDR)")
	fs.StringVar(&c.db, "db", env("SECKILL_DB", "sqlite:./data/seckill.db"), "database: sqlite:PATH (SECKILL_DB)")
	fs.StringVar(&c.redis, "redis", env("SECKILL_REDIS", ""), "Redis URL or cluster seeds; empty = embedded stock gate (SECKILL_REDIS)")
	fs.StringVar(&c.jwtSecret, "jwt-secret", env("SECKILL_JWT_SECRET", ""), "HS256 `secret` of user tokens, >= 32 bytes; random when empty (SECKILL_JWT_SECRET)")
	fs.StringVar(&c.adminToken, "admin-token", env("SECKILL_ADMIN_TOKEN", ""), "bearer `token` for /api/admin; random when empty (SECKILL_ADMIN_TOKEN)")
	fs.StringVar(&demo, "demo", env("SECKILL_DEMO", ""), "1: seed a demo activity and serve POST /api/login; default on only without a JWT secret (SECKILL_DEMO)")
	fs.StringVar(&level, "log-level", env("SECKILL_LOG_LEVEL", "info"), "debug, info, warn or error (SECKILL_LOG_LEVEL)")
	fs.DurationVar(&c.sweepEvery, "sweep-every", time.Second, "how often expired payment windows are closed")
	fs.StringVar(&c.role, "role", env("SECKILL_ROLE", roleAll), "all, api or worker; api and worker need Redis (SECKILL_ROLE)")
	fs.StringVar(&rateUser, "rate-user", env("SECKILL_RATE_USER", "5"), "grab requests per second per user, token bucket (0: off) (SECKILL_RATE_USER)")
	fs.StringVar(&rateIP, "rate-ip", env("SECKILL_RATE_IP", "0"), "grab requests per second per client IP, sliding window (0: off; enable when clients reach the service directly, not through NAT or a CDN) (SECKILL_RATE_IP)")
	fs.StringVar(&rateGlobal, "rate-global", env("SECKILL_RATE_GLOBAL", "0"), "grab requests per second per activity across the cluster, token bucket (0: off; set to about 75% of measured capacity) (SECKILL_RATE_GLOBAL)")
	fs.StringVar(&c.pprofAddr, "pprof", env("SECKILL_PPROF", ""), "`address` (loopback or an internal network) to serve Go's /debug/pprof profiles on; empty: off (SECKILL_PPROF)")
	fs.StringVar(&proxies, "trusted-proxies", env("SECKILL_TRUSTED_PROXIES", ""), "comma-separated `CIDRs` or addresses of proxies whose X-Forwarded-For is believed (SECKILL_TRUSTED_PROXIES)")
	fs.StringVar(&claimIdle, "claim-idle", env("SECKILL_CLAIM_IDLE", "30s"), "how long a grab stays with a worker that does not acknowledge it before another worker takes it over; Redis only (SECKILL_CLAIM_IDLE)")
	fs.StringVar(&slowGate, "slow-gate", env("SECKILL_SLOW_GATE", "50ms"), "mean latency of the stock gate (Redis, or the embedded journal) over 10 s above which the node is at level warning (SECKILL_SLOW_GATE)")
	fs.StringVar(&slowDB, "slow-db", env("SECKILL_SLOW_DB", "200ms"), "mean latency of the database over 10 s above which the node is at level warning (SECKILL_SLOW_DB)")
	fs.StringVar(&failRate, "fail-rate", env("SECKILL_FAIL_RATE", "0.05"), "error rate of a dependency over 10 s above which the node is at level degraded (SECKILL_FAIL_RATE)")
	fs.StringVar(&breakerOpen, "breaker-open", env("SECKILL_BREAKER_OPEN", "2s"), "how long a tripped circuit breaker answers BUSY before it lets a probe through (SECKILL_BREAKER_OPEN)")
	fs.StringVar(&minReplicas, "redis-min-replicas", env("SECKILL_REDIS_MIN_REPLICAS", "0"), "acknowledge a grab, join, release or spent pass only once this many Redis replicas have it (WAIT); on timeout 503 BUSY; 0: Redis's asynchronous replication (SECKILL_REDIS_MIN_REPLICAS)")
	fs.StringVar(&failoverGrace, "failover-grace", env("SECKILL_FAILOVER_GRACE", "20s"), "Redis Cluster or Sentinel: how long a node may refuse connections, or a slot redirect, before it counts as down and opens the breaker; longer than a failover takes (SECKILL_FAILOVER_GRACE)")
	fs.StringVar(&riskAccounts, "risk-accounts-per-ip", env("SECKILL_RISK_ACCOUNTS_PER_IP", "0"), "distinct users grabbing from one client IP within a minute above which its grabs need a challenge (5x: blocked); 0: off, as behind NAT or a CDN (SECKILL_RISK_ACCOUNTS_PER_IP)")
	fs.StringVar(&riskCadence, "risk-cadence", env("SECKILL_RISK_CADENCE", "on"), "on: a user whose last 8 grabs came at a machine's regular beat must solve a challenge (SECKILL_RISK_CADENCE)")
	fs.StringVar(&rankExact, "rank-exact-max", env("SECKILL_RANK_EXACT_MAX", "1000000"), "the most shares a red packet's leaderboard keeps exactly (a sorted set, ~130 B a member); beyond, a histogram of 8 KiB ranks within a stated bound (SECKILL_RANK_EXACT_MAX)")
	fs.StringVar(&riskSolve, "risk-min-solve", env("SECKILL_RISK_MIN_SOLVE", "1s"), "a challenge answered faster than this is refused; 0: off (SECKILL_RISK_MIN_SOLVE)")
	fs.StringVar(&reconcileEvery, "reconcile-every", env("SECKILL_RECONCILE_EVERY", "1h"), "how often one node compares every current activity's gate with the database, under a lease (0: off) (SECKILL_RECONCILE_EVERY)")
	fs.StringVar(&reconcileRepair, "reconcile-repair", env("SECKILL_RECONCILE_REPAIR", "off"), "on: the scheduled reconciliation repairs the drift it finds; off: it reports it (log, metric, alert) (SECKILL_RECONCILE_REPAIR)")
	fs.StringVar(&archiveAfter, "archive-after", env("SECKILL_ARCHIVE_AFTER", "24h"), "how long an activity's hot state (Redis keys, the process's memory) is kept once its sale and pay windows are over and its queue drained; then it is dropped and the database answers for it (0: kept for ever) (SECKILL_ARCHIVE_AFTER)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("serve: unexpected arguments %q", fs.Args())
	}
	switch demo {
	case "":
		c.demo = c.jwtSecret == ""
	case "1", "true", "on":
		c.demo = true
	case "0", "false", "off":
	default:
		return c, fmt.Errorf("SECKILL_DEMO=%q: want 1 or 0", demo)
	}
	if err := c.logLevel.UnmarshalText([]byte(level)); err != nil {
		return c, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	if c.sweepEvery <= 0 {
		return c, errors.New("-sweep-every must be positive")
	}
	switch c.role {
	case roleAll:
	case roleAPI, roleWorker:
		if c.redis == "" {
			return c, fmt.Errorf("SECKILL_ROLE=%s needs SECKILL_REDIS: the embedded queue lives inside its one process", c.role)
		}
	default:
		return c, fmt.Errorf("SECKILL_ROLE=%q: want all, api or worker", c.role)
	}
	for _, r := range []struct {
		name, val string
		dst       *int
	}{{"SECKILL_RATE_USER", rateUser, &c.rateUser}, {"SECKILL_RATE_IP", rateIP, &c.rateIP}, {"SECKILL_RATE_GLOBAL", rateGlobal, &c.rateGlobal}} {
		n, err := strconv.Atoi(r.val)
		if err != nil || n < 0 || n > maxRate {
			return c, fmt.Errorf("%s=%q: want requests per second from 0 (off) to %d", r.name, r.val, maxRate)
		}
		*r.dst = n
	}
	trusted, err := parseProxies(proxies)
	if err != nil {
		return c, err
	}
	c.trustedProxies = trusted
	c.gateLimits, c.dbLimits = health.GateThresholds, health.DatabaseThresholds
	for _, d := range []struct {
		name, val, example string
		dst                []*time.Duration
	}{
		{"SECKILL_CLAIM_IDLE", claimIdle, "30s", []*time.Duration{&c.claimIdle}},
		{"SECKILL_SLOW_GATE", slowGate, "50ms", []*time.Duration{&c.gateLimits.SlowAfter}},
		{"SECKILL_SLOW_DB", slowDB, "200ms", []*time.Duration{&c.dbLimits.SlowAfter}},
		{"SECKILL_BREAKER_OPEN", breakerOpen, "2s", []*time.Duration{&c.gateLimits.OpenFor, &c.dbLimits.OpenFor}},
		{"SECKILL_FAILOVER_GRACE", failoverGrace, "20s", []*time.Duration{&c.gateLimits.FailoverGrace}},
	} {
		v, err := time.ParseDuration(d.val)
		if err != nil || v <= 0 {
			return c, fmt.Errorf("%s=%q: want a positive duration such as %s", d.name, d.val, d.example)
		}
		for _, dst := range d.dst {
			*dst = v
		}
	}
	rate, err := strconv.ParseFloat(failRate, 64)
	if err != nil || !(rate > 0 && rate < 1) {
		return c, fmt.Errorf("SECKILL_FAIL_RATE=%q: want a fraction between 0 and 1 such as 0.05", failRate)
	}
	c.gateLimits.FailRate, c.dbLimits.FailRate = rate, rate
	if c.riskAccounts, err = strconv.Atoi(riskAccounts); err != nil || c.riskAccounts < 0 || c.riskAccounts > 1_000_000 {
		return c, fmt.Errorf("SECKILL_RISK_ACCOUNTS_PER_IP=%q: want a number of users, 0 for off", riskAccounts)
	}
	if c.riskCadence, err = onOff("SECKILL_RISK_CADENCE", riskCadence); err != nil {
		return c, err
	}
	if c.riskMinSolve, err = time.ParseDuration(riskSolve); err != nil || c.riskMinSolve < 0 {
		return c, fmt.Errorf("SECKILL_RISK_MIN_SOLVE=%q: want a duration such as 1s, or 0 for off", riskSolve)
	}
	if c.rankExactMax, err = strconv.ParseInt(rankExact, 10, 64); err != nil || c.rankExactMax < 0 || c.rankExactMax > sale.MaxStock {
		return c, fmt.Errorf("SECKILL_RANK_EXACT_MAX=%q: want a number of shares from 0 to %d", rankExact, sale.MaxStock)
	}
	if c.replication.Replicas, err = strconv.Atoi(minReplicas); err != nil || c.replication.Replicas < 0 || c.replication.Replicas > 16 {
		return c, fmt.Errorf("SECKILL_REDIS_MIN_REPLICAS=%q: want a number of replicas from 0 to 16", minReplicas)
	}
	if c.reconcileEvery, err = time.ParseDuration(reconcileEvery); err != nil || c.reconcileEvery < 0 ||
		c.reconcileEvery > 0 && c.reconcileEvery < time.Second {
		return c, fmt.Errorf("SECKILL_RECONCILE_EVERY=%q: want a duration of a second or more such as 1h, or 0 for off", reconcileEvery)
	}
	if c.archiveAfter, err = time.ParseDuration(archiveAfter); err != nil || c.archiveAfter < 0 {
		return c, fmt.Errorf("SECKILL_ARCHIVE_AFTER=%q: want a duration such as 24h, or 0 to keep everything", archiveAfter)
	}
	if c.reconcileRepair, err = onOff("SECKILL_RECONCILE_REPAIR", reconcileRepair); err != nil {
		return c, err
	}
	if c.replication.Replicas > 0 && c.redis == "" {
		return c, errors.New("SECKILL_REDIS_MIN_REPLICAS needs SECKILL_REDIS: the embedded gate has no replicas")
	}
	return c, nil
}

// onOff reads a switch setting: on, 1 or true; off, 0 or false.
func onOff(name, val string) (bool, error) {
	switch val {
	case "on", "1", "true":
		return true, nil
	case "off", "0", "false":
		return false, nil
	}
	return false, fmt.Errorf("%s=%q: want on or off", name, val)
}

// riskRules builds the risk engine of c: the rules switched on.
func riskRules(c config) *risk.Engine {
	var rules []risk.Rule
	if c.riskAccounts > 0 {
		rules = append(rules, &risk.AccountsPerIP{ChallengeAbove: c.riskAccounts, BlockAt: 5 * c.riskAccounts, Window: time.Minute})
	}
	if c.riskCadence {
		rules = append(rules, &risk.Cadence{Clicks: 8, Slowest: 5 * time.Second, Jitter: 0.05})
	}
	if c.riskMinSolve > 0 {
		rules = append(rules, risk.SolveTime{Fastest: c.riskMinSolve})
	}
	return risk.New(rules...)
}

func randomSecret() string {
	var b [32]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// serve builds every dependency explicitly, serves until ctx ends, then shuts down in order:
// stop accepting and drain in-flight requests, stop the worker and the sweeper, close the gate
// and its queue, close the database.
func serve(ctx context.Context, c config, stdout, stderr io.Writer) error {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: c.logLevel}))
	secretShown, tokenShown := c.jwtSecret == "", c.adminToken == ""
	if secretShown {
		c.jwtSecret = randomSecret()
	}
	if tokenShown {
		c.adminToken = randomSecret()
	}
	tokens, err := auth.New([]byte(c.jwtSecret), time.Now)
	if err != nil {
		return err
	}

	store, err := sqlstore.Open(ctx, c.db)
	if err != nil {
		return err
	}
	defer store.Close()
	dbGuard := health.NewGuard(health.Database, c.dbLimits, time.Now)
	db := health.Store(store, dbGuard)
	g, err := openGate(ctx, c, db, log)
	if err != nil {
		return err
	}
	defer g.close()
	monitor := health.NewMonitor(g.guard, dbGuard)
	stats := metrics.New().Watch(monitor)
	svc := sale.NewService(g.gate, g.queue, db, time.Now).WithChallenges(g.challenges).WithEvents(stats.Order).
		WithRanking(g.ranking, health.Leaders(store, dbGuard)).WithLine(g.line)
	stats.WatchLeaderboards(svc.LeaderboardUsages).WatchActivities(svc.Gauges)
	if g.restocks != nil {
		svc.WithRestocks(g.restocks, restockFlagTTL)
	}
	if err := svc.Warm(ctx, time.Now().Add(-sale.MaxPayWindow)); err != nil {
		return err
	}
	if err := svc.ReloadBlocks(ctx); err != nil {
		return err
	}
	var demoEnded []string
	if c.demo {
		if demoEnded, err = seedDemo(ctx, svc, time.Now()); err != nil {
			return err
		}
	}

	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return err
	}
	if c.pprofAddr != "" {
		pl, err := net.Listen("tcp", c.pprofAddr)
		if err != nil {
			ln.Close()
			return fmt.Errorf("SECKILL_PPROF: %w", err)
		}
		ps := &http.Server{Handler: pprofMux(), ReadHeaderTimeout: 5 * time.Second}
		go ps.Serve(pl)
		defer ps.Close()
		log.Info("profiles", "addr", pl.Addr().String())
	}

	rules := riskRules(c)
	rules.Observe = stats.Risk
	pages, err := web.Handler()
	if err != nil {
		return fmt.Errorf("pages: %w", err)
	}
	api := httpapi.New(httpapi.Config{
		Pages: pages, PagePatterns: web.Patterns,
		Observe: stats, Metrics: stats.Handler(),
		Service: svc, Tokens: tokens, AdminToken: c.adminToken, DevLogin: c.demo, Log: log, Health: monitor,
		Risk: rules,
		Ready: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, time.Second) // a hung dependency is not ready
			defer cancel()
			return errors.Join(store.Ping(ctx), g.ping(ctx))
		},
		Limits: httpapi.Limits{
			PerIP:       ratelimit.Rule{PerSecond: c.rateIP},
			PerUser:     ratelimit.Rule{PerSecond: c.rateUser, Burst: c.rateUser},
			PerActivity: ratelimit.Rule{PerSecond: c.rateGlobal, Burst: c.rateGlobal},
			Windows:     g.windows, Buckets: g.buckets,
		},
		TrustedProxies: c.trustedProxies,
	})
	var handler http.Handler = api
	if c.role == roleWorker {
		health := http.NewServeMux()
		health.Handle("GET /healthz", api)
		health.Handle("GET /readyz", api)
		health.Handle("GET /metrics", api)
		handler = health
	}
	srv := &http.Server{
		Handler: handler,
		// One read deadline for the headers and the (at most 64 KiB) body together: a slow
		// client gets 5 s, and the server sets one deadline per request instead of two.
		ReadTimeout:  5 * time.Second,
		WriteTimeout: 30 * time.Second,
		IdleTimeout:  120 * time.Second,
		ErrorLog:     slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(api.StopStreams) // Shutdown waits for handlers; live streams never end

	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	if g.restocks != nil {
		wg.Go(func() { listenRestocks(bg, svc, log) })
	}
	wg.Go(func() { reloadCaches(bg, svc, log) })
	if g.settle != nil {
		wg.Go(func() { settleReservations(bg, g.settle, log) })
	}
	if c.role != roleAPI {
		wg.Go(func() {
			(&worker.Worker{Queue: g.queue, Store: db, Log: log, Batch: 256, Linger: g.linger,
				Placed: func(ps []sale.Placement) {
					stats.Placed(ps)
					if err := svc.OrdersPlaced(bg, ps); err != nil {
						log.Warn("leaderboard", "err", err) // the database fallback still answers
					}
				},
				Buried: func(n int) { stats.Order("dead_lettered", n) }}).Run(bg)
		})
		wg.Go(func() {
			svc.NewDrainer(consumerName(), drainTick).Observe(stats.Admitted).Run(bg, throttled(5*time.Second,
				func(activityID string, err error, repeats int) {
					log.Warn("drain the line", "activity", activityID, "err", err, "failed_rounds", repeats)
				}))
		})
		wg.Go(func() {
			(&worker.Sweeper{Service: svc, Log: log, Every: c.sweepEvery, Batch: 256,
				Expired: func(n int) { stats.Order("expired", n) }}).Run(bg)
		})
		if c.archiveAfter > 0 {
			wg.Go(func() {
				(&worker.Archiver{Service: svc, Lease: g.lease, Holder: consumerName(), Every: min(archiveEvery, c.archiveAfter),
					Keep: c.archiveAfter, Log: log}).Run(bg)
			})
		}
		if c.reconcileEvery > 0 {
			wg.Go(func() {
				(&worker.Reconciler{Service: svc, Lease: g.lease, Holder: consumerName(), Every: c.reconcileEvery,
					Repair: c.reconcileRepair, Log: log, Checked: stats.Reconciled,
					Done: func(checked []string) { stats.ReconcileRound(checked, time.Now()) }}).Run(bg)
			})
		}
	}

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	base := "http://" + ln.Addr().String()
	fmt.Fprintf(stdout, "seckill listening on %s\n", base)
	if tokenShown {
		fmt.Fprintf(stdout, "admin token: %s\n", c.adminToken)
	}
	if secretShown {
		fmt.Fprintf(stdout, "JWT secret (random for this run): %s\n", c.jwtSecret)
	}
	if c.role != roleWorker {
		fmt.Fprintf(stdout, "pages: %s/  dashboard: %s/admin\n", base, base)
	}
	if c.demo {
		fmt.Fprintf(stdout, "demo sale: %s/activity/%s  red packet: %s/activity/%s  waiting line: %s/activity/%s  (dev login on the page, or POST %s/api/login {\"user\":\"alice\"})\n",
			base, demoID, base, demoPacketID, base, demoQueueID, base)
		if len(demoEnded) > 0 {
			fmt.Fprintf(stdout, "the demo activities %s of this database have ended: start on a new -db (or remove its file) for fresh ones\n",
				strings.Join(demoEnded, ", "))
		}
	}
	if c.ready != nil {
		c.ready(base)
	}
	log.Info("serving", "addr", ln.Addr().String(), "role", c.role, "db", redactDSN(c.db), "redis", c.redis != "", "demo", c.demo)

	select {
	case err = <-serveErr:
	case <-ctx.Done():
		log.Info("shutting down")
		shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		err = srv.Shutdown(shut)
		cancel()
	}
	// Every grab answered has been committed (Shutdown waited for the handlers). The worker
	// finishes its batch and the sweeper its round before the gate and the queue close under
	// them; the database closes last (deferred).
	stopBG()
	wg.Wait()
	g.close()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// blocksEvery is how often a node reloads the blacklist and the activities: a change made
// through another node (an entry, an activity with its own rate limits) takes effect here within it.
const blocksEvery = 2 * time.Second

// reloadCaches keeps this node's copies of the blacklist and of the activities fresh until ctx
// ends. A failed reload keeps the copy it had.
func reloadCaches(ctx context.Context, svc *sale.Service, log *slog.Logger) {
	every(ctx, blocksEvery, func() {
		if err := svc.ReloadBlocks(ctx); err != nil && ctx.Err() == nil {
			log.Warn("blacklist", "err", err)
		}
		if err := svc.ReloadActivities(ctx); err != nil && ctx.Err() == nil {
			log.Warn("activities", "err", err)
		}
	})
}

// throttled passes an activity's failures to report at most once every d, with how many
// rounds failed since the last report: a drainer whose dependency is down fails ten rounds a
// second, and one line a few seconds says as much.
func throttled(d time.Duration, report func(activityID string, err error, repeats int)) func(string, error) {
	type last struct {
		at      time.Time
		repeats int
	}
	seen := map[string]*last{} // the drainer reports from its one goroutine
	return func(activityID string, err error) {
		l := seen[activityID]
		if l == nil {
			l = &last{}
			seen[activityID] = l
		}
		l.repeats++
		if now := time.Now(); now.Sub(l.at) >= d {
			report(activityID, err, l.repeats)
			l.at, l.repeats = now, 0
		}
	}
}

// every runs fn every d until ctx ends.
func every(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// settleAfter is how old a sharded stock's reservation must be before the sweeper settles it:
// far longer than a grab can take, so that it only finishes the abandoned ones.
const settleAfter = 30 * time.Second

// settleReservations runs settle every 10 s until ctx ends.
func settleReservations(ctx context.Context, settle func(ctx context.Context) (int, error), log *slog.Logger) {
	every(ctx, 10*time.Second, func() {
		if n, err := settle(ctx); err != nil && ctx.Err() == nil {
			log.Warn("settle sharded stock reservations", "err", err)
		} else if n > 0 {
			log.Info("settled abandoned reservations", "n", n)
		}
	})
}

// listenRestocks clears this node's sold-out flags when another node restocks, until ctx ends. A
// subscription that cannot be made (Redis away) is tried again every second.
func listenRestocks(ctx context.Context, svc *sale.Service, log *slog.Logger) {
	for ctx.Err() == nil {
		if err := svc.ListenRestocks(ctx); err != nil {
			log.Warn("restock announcements", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// stockGate is the gate and queue a node runs on, with how to check and close them.
type stockGate struct {
	gate  sale.Gate
	queue sale.Queue
	ping  func(ctx context.Context) error
	close func()
	// linger is the worker's wait after a short batch (see worker.Worker.Linger). The embedded
	// queue gathers its own batches; a stream hands out whatever has arrived.
	linger time.Duration
	// windows and buckets keep the rate limits: in the process, or on Redis for the cluster.
	windows, buckets ratelimit.Limiter
	// restocks tells the other nodes of a restock (distributed mode; nil: one node).
	restocks sale.Restocks
	// challenges keeps the anti-bot questions until they are answered.
	challenges sale.Challenges
	// settle finishes the grabs of sharded stocks left half-way (distributed mode; nil: none).
	settle func(ctx context.Context) (int, error)
	// guard is the circuit breaker and health record of the gate's backend (Redis, or the
	// embedded journal), through which every call above goes.
	guard *health.Guard
	// ranking keeps the red packets' leaderboards beside the gate.
	ranking sale.Ranking
	// line keeps the waiting lines of queue and lottery activities.
	line sale.Line
	// lease lets one node at a time run the scheduled reconciliation.
	lease sale.Lease
}

// archiveEvery is how often a node looks for activities to archive (more often when they are
// kept for less).
const archiveEvery = time.Minute

// drainTick is how often a node's drainer admits tickets from the lines it leads.
const drainTick = 100 * time.Millisecond

// restockFlagTTL is how long a node of a cluster trusts its sold-out flags: restocks are
// announced, so this only bounds how long a missed announcement keeps a unit unsold.
const restockFlagTTL = 5 * time.Second

// maxChallenges bounds the unanswered challenges one embedded node keeps (about 100 B each).
const maxChallenges = 1 << 20

// openGate builds the embedded gate (in process, its queue beside the database) or, when
// SECKILL_REDIS is set, the distributed one (Redis or Redis Cluster, streams). store is the
// guarded database: the gate's and the line's lookups of activities go through its breaker like
// the service's.
func openGate(ctx context.Context, c config, store sale.Store, log *slog.Logger) (stockGate, error) {
	if c.redis == "" {
		journal, err := sqlstore.OpenJournal(ctx, c.db)
		if err != nil {
			return stockGate{}, err
		}
		lines, err := sqlstore.OpenLineJournal(ctx, c.db)
		if err != nil {
			journal.Close()
			return stockGate{}, err
		}
		line, err := memory.OpenLine(ctx, lines, store.Activity)
		if err != nil {
			journal.Close()
			lines.Close()
			return stockGate{}, err
		}
		queue := memory.NewQueue(journal, time.Second, 20*time.Millisecond)
		gate := memory.NewGate(journal, 512, queue.Wake)
		guard := health.NewGuard("journal", c.gateLimits, time.Now)
		var once sync.Once
		return stockGate{gate: health.Gate(gate, guard), guard: guard, queue: queue, ping: journal.Ping,
			challenges: memory.NewChallenges(maxChallenges), ranking: memory.NewRanking(c.rankExactMax),
			windows: ratelimit.NewWindows(time.Now), buckets: ratelimit.NewBuckets(time.Now), line: health.Line(line, guard),
			lease: memory.NewLease(time.Now),
			close: func() {
				once.Do(func() { line.Close(); lines.Close(); gate.Close(); journal.Close() })
			}}, nil
	}
	redisgate.LogTo(log)
	rdb, err := redisgate.Dial(ctx, c.redis)
	if err != nil {
		return stockGate{}, err
	}
	activities := func(ctx context.Context) ([]sale.Activity, error) {
		return store.Activities(ctx, time.Now().Add(-sale.MaxPayWindow))
	}
	queue := redisgate.NewQueue(rdb, consumerName(), activities, 20*time.Millisecond, c.claimIdle)
	guard := health.NewGuard("redis", c.gateLimits, time.Now)
	if topo := redisgate.NewTopology(rdb); topo != nil {
		guard.WithTopology(topo.Classify)
	}
	gate := redisgate.New(rdb, store.Activity).WithReplication(c.replication)
	var once sync.Once
	return stockGate{gate: health.Gate(gate, guard), guard: guard, queue: queue, lease: redisgate.NewLease(rdb),
		settle:   func(ctx context.Context) (int, error) { return gate.Settle(ctx, settleAfter, time.Now()) },
		linger:   50 * time.Millisecond,
		windows:  health.Limiter(ratelimit.NewRedisWindows(rdb, time.Now), guard),
		buckets:  health.Limiter(ratelimit.NewRedisBuckets(rdb), guard),
		restocks: redisgate.NewRestocks(rdb), challenges: health.Challenges(redisgate.NewChallenges(rdb), guard),
		line:    health.Line(redisgate.NewLine(rdb).WithReplication(c.replication), guard),
		ranking: health.Ranking(redisgate.NewRanking(rdb, c.rankExactMax), guard),
		ping:    func(ctx context.Context) error { return redisgate.Ping(ctx, rdb) },
		close:   func() { once.Do(func() { rdb.Close() }) }}, nil
}

// pprofMux serves Go's profiles: never on the API's listener, only on the SECKILL_PPROF one.
func pprofMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// consumerName names this node in the stream's consumer group: unique per process.
func consumerName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), randomSecret()[:8])
}

// redactDSN hides a database password in logs.
func redactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxx")
			return u.String()
		}
	}
	return dsn
}
