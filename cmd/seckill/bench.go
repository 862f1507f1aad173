package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"seckill/internal/bench"
	"seckill/internal/signature"

	"seckill/internal/node"
)

// netemKinds are the bad networks of --fault netem, netfault's Latency, Reset and HalfOpen (the
// default): named here, so that a release build links no proxy (TestNetemKindsAreNetfaults holds
// the two lists together).
var netemKinds = []string{"latency", "reset", "halfopen"}

const netemDefault = "halfopen"

// benchConfig is what `seckill bench` runs with.
type benchConfig struct {
	url, adminToken, secret string
	db, redis               string              // the in-process server's or the spawned nodes', when there is no url
	spawn                   int                 // nodes of the binary to start; 0: serve in this process
	workers                 int                 // more nodes that run only the worker; then the spawn nodes serve only the API
	binary                  string              // the binary to spawn
	fault                   string              // "" or one of faultKinds
	faultFor                time.Duration       // how long an outage (db) or a bad network (netem) lasts
	netem, netemLink        string              // the bad network, and the link it is on (redis or db)
	redisVia                map[string]string   // the spawned nodes' routes to Redis through the nemesis's proxies (routeRedis)
	minReplicas             int                 // SECKILL_REDIS_MIN_REPLICAS of the servers bench starts
	payments                *bench.ProviderSpec // the simulated payment provider and webhook receiver (--payments)
	serverEnv               map[string]string   // more settings of the in-process server (seckill risk gen's)
	sale                    bench.Sale
	redisFlag, dbFlag       string        // --redis and --db as given (startServers replaces spawn:... by addresses)
	nemesis                 bool          // --nemesis: a nemesis run instead of one sale
	nemesisSeed             uint64        // its seed
	duration                time.Duration // how long it lasts
	rate                    int           // its crowd's clicks a second
	jsonOut                 bool
	history                 string
	plot                    string // SVG file of the run over time
	timeout                 time.Duration
}

// parseBench reads bench's flags. The secrets default to the server's environment variables.
func parseBench(args []string, getenv func(string) string, stderr io.Writer) (benchConfig, error) {
	var c benchConfig
	var arrival, at, kill string
	var dbOutage time.Duration
	var payments, operator bool
	var nemesis string
	pay := bench.ProviderSpec{}
	s := &c.sale
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.url, "url", "", "base `URL` of a running server; empty: start one in this process on a free loopback port")
	fs.StringVar(&c.adminToken, "admin-token", getenv("SECKILL_ADMIN_TOKEN"), "the server's admin `token` (SECKILL_ADMIN_TOKEN)")
	fs.StringVar(&c.secret, "jwt-secret", getenv("SECKILL_JWT_SECRET"), "the server's JWT `secret`, to mint the users' tokens (SECKILL_JWT_SECRET)")
	fs.StringVar(&c.db, "db", "", "the database of the server bench starts (default: SQLite in a temporary directory); spawn:mariadb or spawn:postgres starts one")
	fs.StringVar(&c.redis, "redis", "", "SECKILL_REDIS of the server bench starts (default: the embedded gate); spawn starts a redis-server, spawn:cluster a cluster of three masters with a replica each (--min-replicas + 1 each), spawn:sentinel a master, two replicas and three sentinels, all with appendfsync always")
	fs.IntVar(&c.spawn, "spawn", 0, "start this many nodes of --binary (sharing --redis and --db) instead of serving in this process")
	fs.IntVar(&c.workers, "workers", 0, "with --spawn: start this many more nodes that run only the worker, and the --spawn nodes serve only the API (so that the report's CPU says what each costs)")
	fs.StringVar(&c.binary, "binary", "", "the seckill binary --spawn starts (default: this program)")
	fs.StringVar(&c.fault, "fault", "", "strike at --at: api (SIGKILL and restart an API node, --spawn), worker (the worker node, --spawn, --redis), redis (redis-server, --redis spawn), db (the database, kept down --fault-for, --db spawn:...), redis-failover (the master of the sale's slot, --redis spawn:cluster), sentinel-failover (the master, --redis spawn:sentinel), reshard (the sale's slot moved to another master, --redis spawn:cluster) or netem (a bad network for --fault-for, see --netem)")
	fs.StringVar(&kill, "kill", "", "the same as --fault api, worker or redis")
	fs.DurationVar(&c.faultFor, "fault-for", 0, "how long --fault db keeps the database down, and --fault netem the network bad (default 3s)")
	fs.DurationVar(&dbOutage, "db-outage", 0, "the same as --fault db --fault-for")
	fs.StringVar(&c.netem, "netem", netemDefault, "--fault netem: latency (200 ms each way), reset (every connection reset) or halfopen (nothing answers, nothing closes)")
	fs.StringVar(&c.netemLink, "netem-link", "redis", "--fault netem: the link it is on, redis (--redis spawn) or db (--db spawn:...)")
	fs.IntVar(&c.minReplicas, "min-replicas", 0, "SECKILL_REDIS_MIN_REPLICAS of the servers bench starts")
	fs.StringVar(&at, "at", "50%", "when --fault strikes: the share of the clicks answered")
	fs.IntVar(&s.Users, "users", 20_000, "distinct users")
	fs.Int64Var(&s.Stock, "stock", 500, "units on sale (shares of a red packet)")
	fs.IntVar(&s.Concurrency, "concurrency", 64, "requests in flight at most (--nemesis: connections opened ahead; its buyers click on time however many wait)")
	fs.IntVar(&s.Dup, "dup", 1, "extra clicks per user")
	fs.StringVar(&arrival, "arrival", "burst", "burst (every click as soon as a connection is free) or ramp:DURATION (clicks spread evenly)")
	fs.StringVar(&s.Kind, "kind", "item", "item or redpacket")
	fs.Int64Var(&s.PerUserLimit, "per-user-limit", 1, "units one user may buy")
	fs.Int64Var(&s.StockShards, "stock-shards", 0, "split the item's stock into this many counters on Redis Cluster slots (default 1)")
	fs.Int64Var(&s.TotalCents, "total-cents", 0, "red packets: the amount split (default 100 cents per share)")
	fs.Float64Var(&s.Unpaid, "unpaid", 0, "share of the winners who never pay: their orders expire, the units go back and the losers try again")
	fs.DurationVar(&s.PayWindow, "pay-window", 0, "the activity's payment window (needed with --unpaid, at most 10m; default the server's 15m)")
	fs.Uint64Var(&s.Seed, "seed", 1, "orders the clicks; the same seed sends the same sequence")
	fs.StringVar(&s.Line.Admission, "admission", "direct", "direct (grabs race to the gate), queue (a waiting line: the early crowd shuffled, then in order), lottery (entries, then a draw) or reservation (reservations, then waves)")
	fs.IntVar(&s.Reservation.Reserved, "reserved", 0, "reservation: how many of the users reserve before the start (the others click too, and must all be refused)")
	fs.Int64Var(&s.Reservation.Waves, "waves", 0, "reservation: the waves the reservers enter in (default 1)")
	fs.DurationVar(&s.Reservation.WaveInterval, "wave-interval", 0, "reservation: the time between two waves' openings (whole seconds; required with several waves)")
	fs.Float64Var(&s.Reservation.Show, "show", 0, "reservation: the share of the reservers who come to the sale, drawn from the seed (the others never click); 0: all")
	fs.Int64Var(&s.Line.AdmitRate, "admit-rate", 0, "queue: tickets the line admits a second (default the server's, 1000)")
	fs.Int64Var(&s.Line.QueueCap, "queue-cap", 0, "queue or lottery: tickets waiting at most (default the server's, 10 × stock)")
	fs.DurationVar(&s.Line.PreQueue, "pre-queue", 0, "queue or lottery: the activity starts this long after it is created; the clicks before form the early crowd (default 3s)")
	fs.BoolVar(&payments, "payments", false, "the winners who pay (see --unpaid; with --nemesis, half the winners) pay at a simulated payment provider on loopback, which calls the server back after a random delay (again, to the next node, until one takes it), and a webhook receiver checks every order event: the checker adds that every payment is kept or refunded and every order's events arrived, in order")
	fs.StringVar(&pay.Kind, "provider", "signed", "--payments: the provider the servers take payments at and the buyers pay at: signed (the generic signed callback), stripe (its API on stripe-mock, which must be installed), alipay or wechatpay (their APIs faked on loopback, checking every signature); with the last three the checker adds that the server refunded every late payment through the provider, once")
	fs.Float64Var(&pay.Late, "late", 0.1, "--payments: share of the payments called back after the payment window (their orders are refunded, the units resold)")
	fs.Float64Var(&pay.Dup, "dup-callbacks", 0.2, "--payments: share of the payments called back twice")
	fs.Float64Var(&pay.Forged, "forged", 0.1, "--payments: share of the payments preceded by a forged callback, which the server must refuse")
	fs.BoolVar(&operator, "operator", false, "an operator changes the sale mid-crowd: 5 units added through the first node at 20 % of the clicks, the sale renamed through the second at 40 %, 5 more units through the first at 60 %, the sale ended through the second at 80 %; the checker adds that no grab sent after the end won, and the report counts the answers BUSY")
	fs.StringVar(&nemesis, "nemesis", "", "run a nemesis with this `seed` instead of one sale: for --duration a crowd of --rate clicks a second buys from several activities at once (grabs, retries, pays, cancels) while an operator changes them and faults drawn from the seed strike the deployment bench started (--spawn, --workers, --redis spawn..., --db spawn:...); the checker reads the whole history back")
	fs.DurationVar(&c.duration, "duration", time.Minute, "--nemesis: how long the crowd runs and the nemesis strikes")
	fs.IntVar(&c.rate, "rate", 100, "--nemesis: the crowd's clicks a second")
	fs.BoolVar(&c.jsonOut, "json", false, "print the result as one JSON object on the last line")
	fs.StringVar(&c.history, "history", "", "write the history (one JSON line per request) to this `file` (default: a new file in the temporary directory)")
	fs.StringVar(&c.plot, "plot", "", "draw the answers per second and their p99 latency over time to this SVG `file`")
	fs.DurationVar(&s.DrainTimeout, "drain-timeout", 2*time.Minute, "how long to wait for the queue to drain after the crowd")
	fs.DurationVar(&c.timeout, "timeout", 15*time.Minute, "stop the whole run after this long")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("bench: unexpected arguments %q", fs.Args())
	}
	c.redisFlag, c.dbFlag = c.redis, c.db
	switch {
	case arrival == "burst":
	case strings.HasPrefix(arrival, "ramp:"):
		d, err := time.ParseDuration(strings.TrimPrefix(arrival, "ramp:"))
		if err != nil || d <= 0 {
			return c, fmt.Errorf("--arrival %q: want ramp:DURATION such as ramp:10s", arrival)
		}
		s.Ramp = d
	default:
		return c, fmt.Errorf("--arrival %q: want burst or ramp:DURATION", arrival)
	}
	if s.Kind == "redpacket" && s.TotalCents == 0 {
		s.TotalCents = 100 * s.Stock
	}
	if s.Line.Admission == bench.AdmitReservation && s.Reservation.Waves == 0 {
		s.Reservation.Waves = 1
	}
	if s.Line.Lined() && s.Line.PreQueue == 0 {
		s.Line.PreQueue = 3 * time.Second
	}
	if c.timeout <= 0 {
		return c, errors.New("--timeout must be positive")
	}
	if err := c.parseFaultAliases(kill, dbOutage); err != nil {
		return c, err
	}
	if nemesis != "" {
		seed, err := strconv.ParseUint(nemesis, 10, 64)
		if err != nil {
			return c, fmt.Errorf("--nemesis %q: want a seed, a whole number", nemesis)
		}
		c.nemesis, c.nemesisSeed = true, seed
		switch {
		case c.spawn == 0:
			return c, errors.New("--nemesis strikes the nodes and servers bench starts: it needs --spawn")
		case c.fault != "" || operator || s.Unpaid > 0 || s.Line.Admission != "direct":
			return c, errors.New("--nemesis makes its own faults, changes and crowd: no --fault, --operator, --unpaid or --admission")
		case c.duration <= 0 || c.duration > bench.MaxRamp:
			return c, fmt.Errorf("--duration %s: want a positive duration of at most %s", c.duration, bench.MaxRamp)
		case c.rate < 1 || c.rate > bench.MaxNemesisRate:
			return c, fmt.Errorf("--rate %d: want 1 to %d clicks a second", c.rate, bench.MaxNemesisRate)
		}
		if _, err := bench.Schedule(seed, c.duration, c.topology()); err != nil {
			return c, err
		}
	}
	if err := c.parseFleet(at, s); err != nil {
		return c, err
	}
	if c.url != "" {
		if c.db != "" || c.redis != "" || c.spawn > 0 || c.fault != "" {
			return c, errors.New("--db, --redis and --spawn are for the servers bench starts; with --url the server runs already")
		}
		if c.secret == "" || c.adminToken == "" {
			return c, errors.New("--url needs the server's --jwt-secret and --admin-token (or SECKILL_JWT_SECRET and SECKILL_ADMIN_TOKEN)")
		}
	} else {
		c.secret, c.adminToken = randomSecret(), randomSecret() // the in-process server takes these
	}
	if operator {
		s.Operator = &bench.DefaultOperator
	}
	s.UserPrefix = fmt.Sprintf("bench-%d-", s.Seed)
	s.Secret = c.secret
	if !payments && pay.Kind != signature.ProviderName {
		return c, errors.New("--provider is --payments's: the provider the winners pay at")
	}
	if payments {
		if c.url != "" {
			return c, errors.New("--payments is for the servers bench starts: it sets their payment and webhook secrets")
		}
		if c.nemesis && s.PayWindow == 0 {
			s.PayWindow = nemesisPayWindow
		}
		if !c.nemesis && (s.Unpaid == 0 || s.Fault != nil || s.Line.Lined()) {
			return c, errors.New("--payments needs --unpaid (and --pay-window), and no fault or line: the winners pay at the provider")
		}
		if err := s.Validate(); err != nil {
			return c, err
		}
		pay.PaymentSecret, pay.HookSecret, pay.Window, pay.Seed = randomSecret(), randomSecret(), s.PayWindow, s.Seed
		if err := pay.Validate(); err != nil {
			return c, err
		}
		c.payments = &pay
	}
	return c, s.Validate()
}

// parseFaultAliases turns the older --kill and --db-outage into --fault.
func (c *benchConfig) parseFaultAliases(kill string, dbOutage time.Duration) error {
	switch {
	case kill != "" && kill != "api" && kill != "worker" && kill != "redis":
		return fmt.Errorf("--kill %q: want api, worker or redis", kill)
	case dbOutage < 0:
		return fmt.Errorf("--db-outage %s: want a positive duration", dbOutage)
	case (kill != "" || dbOutage > 0) && c.fault != "", kill != "" && dbOutage > 0:
		return errors.New("one fault per run: --fault, --kill or --db-outage")
	case kill != "":
		c.fault = kill
	case dbOutage > 0:
		c.fault, c.faultFor = "db", dbOutage
	}
	return nil
}

// parseFleet checks the flags of the processes bench starts and the fault it injects.
func (c *benchConfig) parseFleet(at string, s *bench.Sale) error {
	sqlite := c.db == "" || strings.HasPrefix(c.db, "sqlite:")
	dbSpawned := c.db == dbSpawnMariaDB || c.db == dbSpawnPostgres
	if c.fault == "db" && c.faultFor == 0 {
		return errors.New("--fault db needs --fault-for: how long the database stays down")
	}
	if c.fault == "netem" && c.faultFor == 0 {
		c.faultFor = 3 * time.Second
	}
	switch {
	case c.spawn < 0 || c.spawn > 16:
		return fmt.Errorf("--spawn %d: want 1 to 16 nodes", c.spawn)
	case c.workers < 0 || c.workers > 16:
		return fmt.Errorf("--workers %d: want 0 to 16 worker nodes", c.workers)
	case c.workers > 0 && (c.spawn == 0 || c.redis == ""):
		return errors.New("--workers needs --spawn and --redis: the embedded worker lives in the API process")
	case c.spawn > 1 && (c.redis == "" || sqlite):
		return errors.New("--spawn of several nodes needs --redis and a MySQL or PostgreSQL --db that they share")
	case strings.HasPrefix(c.db, "spawn:") && !dbSpawned:
		return fmt.Errorf("--db %q: want %s or %s", c.db, dbSpawnMariaDB, dbSpawnPostgres)
	case strings.HasPrefix(c.redis, "spawn") && c.redis != redisSpawn && c.redis != redisSpawnCluster && c.redis != redisSpawnSentinel:
		return fmt.Errorf("--redis %q: want %s, %s or %s", c.redis, redisSpawn, redisSpawnCluster, redisSpawnSentinel)
	case c.minReplicas < 0 || c.minReplicas > 2:
		return fmt.Errorf("--min-replicas %d: want 0 to 2", c.minReplicas)
	case c.minReplicas > 0 && c.redis != redisSpawnCluster && c.redis != redisSpawnSentinel:
		return errors.New("--min-replicas needs replicas: --redis spawn:cluster or spawn:sentinel")
	case c.faultFor < 0 || c.faultFor > 10*time.Minute:
		return fmt.Errorf("--fault-for %s: want a positive duration of at most 10m", c.faultFor)
	case c.fault == "":
		if c.faultFor != 0 {
			return errors.New("--fault-for without --fault")
		}
		return nil
	case !slices.Contains(faultKinds, c.fault):
		return fmt.Errorf("--fault %q: want %s", c.fault, strings.Join(faultKinds, ", "))
	case c.faultFor != 0 && c.fault != "db" && c.fault != "netem":
		return fmt.Errorf("--fault-for is for --fault db and netem, not %s: one fault per run", c.fault)
	case c.fault == "redis" && c.redis != redisSpawn:
		return errors.New("--fault redis needs --redis spawn: bench kills only a redis-server it started")
	case c.fault == "db" && !dbSpawned:
		return errors.New("--fault db needs --db spawn:mariadb or spawn:postgres: bench stops only a database it started")
	case (c.fault == "api" || c.fault == "worker") && c.spawn == 0:
		return fmt.Errorf("--fault %s needs --spawn: bench kills only the nodes it started", c.fault)
	case c.fault == "worker" && c.redis == "":
		return errors.New("--fault worker needs --redis: the embedded worker lives in the API process (use --fault api)")
	case (c.fault == "redis-failover" || c.fault == "reshard") && c.redis != redisSpawnCluster:
		return fmt.Errorf("--fault %s needs --redis %s: bench moves only a cluster it started", c.fault, redisSpawnCluster)
	case c.fault == "sentinel-failover" && c.redis != redisSpawnSentinel:
		return fmt.Errorf("--fault sentinel-failover needs --redis %s", redisSpawnSentinel)
	case c.fault == "netem" && c.netemLink == "redis" && c.redis != redisSpawn:
		return errors.New("--fault netem on the redis link needs --redis spawn: bench puts the bad network before a redis-server it started")
	case c.fault == "netem" && c.netemLink == "db" && !dbSpawned:
		return errors.New("--fault netem on the db link needs --db spawn:mariadb or spawn:postgres")
	case c.fault == "netem" && c.netemLink != "redis" && c.netemLink != "db":
		return fmt.Errorf("--netem-link %q: want redis or db", c.netemLink)
	case c.fault == "netem" && !slices.Contains(netemKinds, c.netem):
		return fmt.Errorf("--netem %q: want latency, reset or halfopen", c.netem)
	}
	pct, err := strconv.ParseFloat(strings.TrimSuffix(at, "%"), 64)
	if err != nil {
		return fmt.Errorf("--at %q: want a share of the clicks such as 50%%", at)
	}
	s.Fault = &bench.Fault{Kind: c.fault, At: pct / 100}
	return nil
}

// faultKinds are the faults bench injects.
var faultKinds = []string{"api", "worker", "redis", "db", "redis-failover", "sentinel-failover", "reshard", "netem"}

// The values of --redis and --db that make bench start the server itself.
const (
	redisSpawn         = "spawn"
	redisSpawnCluster  = "spawn:cluster"
	redisSpawnSentinel = "spawn:sentinel"
	dbSpawnMariaDB     = "spawn:mariadb"
	dbSpawnPostgres    = "spawn:postgres"
)

// benchCmd runs `seckill bench`: the exit status is non-zero when the run could not be made or
// the checker found a violation.
func benchCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c, err := parseBench(args, getenv, stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()

	setup := c.setup(c.redis, c.db) // before startServers replaces spawn:... with addresses
	if c.payments != nil {
		dir, err := os.MkdirTemp("", "seckill-bench-provider-") // its keys, stripe-mock's log
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		c.payments.Dir, c.payments.StripeMock = dir, startStripeMock
		p, err := bench.StartProvider(*c.payments)
		if err != nil {
			return err
		}
		defer p.Close()
		c.sale.Provider = p
	}
	srvs, err := startServers(&c)
	defer srvs.stop()
	if err != nil {
		return err
	}
	mode, bases := "url", []string{c.url}
	var fleet *bench.Fleet
	var fleetIndex []int // fleet index of each base
	switch {
	case c.url != "":
	case c.spawn > 0:
		if fleet, err = startFleet(ctx, c, stderr); err != nil {
			return err
		}
		defer fleet.Stop()
		bases, fleetIndex = fleet.Bases()
	default:
		base, stop, err := startInProcess(ctx, c, stderr)
		if err != nil {
			return err
		}
		defer stop()
		bases = []string{base}
	}
	if c.url == "" {
		mode = "embedded"
		if c.redis != "" {
			mode = "redis"
		}
	}
	client, err := bench.NewClient(bases, c.adminToken, c.sale.Concurrency)
	if err != nil {
		return err
	}
	defer client.Close()
	if p := c.sale.Provider; p != nil {
		p.CallBackTo(client.Bases) // where the nodes listen now: a node the nemesis restarts moves
	}
	if c.nemesis {
		return runNemesis(ctx, c, fleet, fleetIndex, client, srvs, stdout)
	}
	if f := c.sale.Fault; f != nil {
		f.Inject = injector(c, fleet, fleetIndex, client, srvs)
	}
	if isTerminal(stderr) {
		c.sale.Progress = stderr
	}
	self := "bench"
	if setup.InProcess {
		self = "bench+server"
	}
	c.sale.Meter = bench.ProcessTree(self)
	res, history, err := c.sale.Run(ctx, client)
	if path, herr := writeHistory(c.history, history); herr != nil {
		err = errors.Join(err, herr)
	} else {
		res.History = path
	}
	if err != nil {
		return err
	}
	res.Mode, res.Nodes, res.Setup = mode, len(bases), setup
	if c.plot != "" {
		if err := writePlot(c.plot, res); err != nil {
			return err
		}
	}
	if c.jsonOut {
		err = res.WriteJSON(stdout)
	} else {
		err = res.WriteText(stdout)
	}
	if err == nil && !res.OK {
		err = fmt.Errorf("the checker found violations: oversell %d, undersell %d, duplicates %d, lost %d, shares off %d cents, leaderboard off %d, unsettled payments %d, forged notices accepted %d, refunds off %d, events off %d",
			res.Oversell, res.Undersell, res.Duplicates, res.Lost, res.SharesOff, res.BoardOff, res.Unsettled, res.ForgedAccepted, res.RefundsOff, res.EventsOff)
	}
	return err
}

// startInProcess serves in this process on a free loopback port, on c.db (default: a SQLite file
// in a temporary directory) and c.redis, until stop is called.
func startInProcess(ctx context.Context, c benchConfig, stderr io.Writer) (base string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "seckill-bench-")
	if err != nil {
		return "", nil, err
	}
	db := c.db
	if db == "" {
		db = "sqlite:" + filepath.Join(dir, "bench.db")
	}
	// The server's own defaults (rate limits and all), as `seckill serve` would take them.
	env := map[string]string{"SECKILL_ADDR": "127.0.0.1:0", "SECKILL_METRICS_ADDR": "127.0.0.1:0", "SECKILL_DB": db, "SECKILL_REDIS": c.redis,
		"SECKILL_JWT_SECRET": c.secret, "SECKILL_ADMIN_TOKEN": c.adminToken, "SECKILL_LOG_LEVEL": "error",
		"SECKILL_DEMO": "0", "SECKILL_REDIS_MIN_REPLICAS": strconv.Itoa(c.minReplicas)}
	for _, kv := range c.providerEnv() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	maps.Copy(env, c.serverEnv)
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "OTEL_") { // traces, as the process's environment asks
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	}
	cfg, err := parseServe(nil, env, stderr)
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	ready := make(chan string, 1)
	cfg.ready = func(b string) { ready <- b }
	srvCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- serve(srvCtx, cfg, io.Discard, stderr) }()
	stop = func() {
		cancel()
		<-done
		os.RemoveAll(dir)
	}
	select {
	case base = <-ready:
		return base, stop, nil
	case err = <-done:
		os.RemoveAll(dir)
		cancel()
		return "", nil, fmt.Errorf("the in-process server: %w", err)
	}
}

// startFleet starts c.spawn nodes of the binary on c.redis and c.db (a SQLite file in a temporary
// directory when there is neither), plus c.workers worker nodes (at least one when the worker is
// to be killed): then the others serve only the API.
func startFleet(ctx context.Context, c benchConfig, stderr io.Writer) (*bench.Fleet, error) {
	roles := c.roles()
	exe := c.binary
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("--binary: %w", err)
		}
	}
	db := c.db
	if db == "" {
		dir, err := os.MkdirTemp("", "seckill-bench-")
		if err != nil {
			return nil, err
		}
		db = "sqlite:" + filepath.Join(dir, "bench.db") // left for a look after the run
	}
	env := []string{"SECKILL_DB=" + db, "SECKILL_REDIS=" + c.redis, "SECKILL_JWT_SECRET=" + c.secret,
		"SECKILL_ADMIN_TOKEN=" + c.adminToken, "SECKILL_LOG_LEVEL=error", "SECKILL_DEMO=0",
		"SECKILL_CLAIM_IDLE=3s", // a killed worker's grabs are taken over within the drain
		"SECKILL_REDIS_MIN_REPLICAS=" + strconv.Itoa(c.minReplicas)}
	env = append(env, c.providerEnv()...)
	if c.nemesis && labBuilt {
		env = append(env, labClockEnv+"=on") // the clock-skew strike's
	}
	if len(c.redisVia) > 0 { // the bad networks' (routeRedis)
		var routes []string
		for server, via := range c.redisVia {
			routes = append(routes, server+"="+via)
		}
		slices.Sort(routes)
		env = append(env, labRedisViaEnv+"="+strings.Join(routes, ","))
	}
	return bench.StartFleet(ctx, exe, env, roles, stderr)
}

// providerEnv is the environment that points the servers bench starts at its simulated payment
// provider and webhook receiver; none without --payments.
func (c benchConfig) providerEnv() []string {
	if c.sale.Provider == nil {
		return nil
	}
	return c.sale.Provider.Env()
}

// roles are the roles of the nodes bench starts: c.spawn serving the API, and the worker too
// unless there are worker nodes (--workers, or the one --fault worker kills).
func (c benchConfig) roles() []string {
	if c.spawn == 0 {
		return nil
	}
	api, workers := node.RoleAll, c.workers
	if c.fault == "worker" {
		workers = max(workers, 1)
	}
	if workers > 0 {
		api = node.RoleAPI
	}
	roles := slices.Repeat([]string{api}, c.spawn)
	return append(roles, slices.Repeat([]string{node.RoleWorker}, workers)...)
}

// setup says what the run's servers are, for the report. A database or Redis given by address is
// "given": its address may hold a password.
func (c benchConfig) setup(redisFlag, dbFlag string) *bench.Setup {
	s := &bench.Setup{Redis: redisFlag, DB: dbFlag, MinReplicas: c.minReplicas, Roles: c.roles(), InProcess: c.url == "" && c.spawn == 0}
	if !strings.HasPrefix(s.Redis, "spawn") && s.Redis != "" {
		s.Redis = "given"
	}
	if strings.HasPrefix(s.Redis, "spawn") {
		s.Fsync = spawnFsync
	}
	switch {
	case c.url != "":
		s.Redis, s.DB = "given", "given"
	case s.DB == "" || strings.HasPrefix(s.DB, "sqlite:"):
		s.DB = "sqlite"
	case !strings.HasPrefix(s.DB, "spawn:"):
		s.DB = "given"
	}
	return s
}

// writeHistory writes the history to path, or to a new temporary file when path is empty, and
// returns where.
func writeHistory(path string, history []bench.Record) (string, error) {
	if len(history) == 0 {
		return "", nil
	}
	var f *os.File
	var err error
	if path == "" {
		f, err = os.CreateTemp("", "seckill-bench-history-*.jsonl")
	} else {
		f, err = os.Create(path)
	}
	if err != nil {
		return "", fmt.Errorf("history: %w", err)
	}
	if err := bench.WriteHistory(f, history); err != nil {
		f.Close()
		return "", fmt.Errorf("history: %w", err)
	}
	return f.Name(), f.Close()
}

// writePlot draws the run to an SVG file.
func writePlot(path string, res bench.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if err := res.WriteSVG(f); err != nil {
		f.Close()
		return fmt.Errorf("plot: %w", err)
	}
	return f.Close()
}

// isTerminal reports whether w is a terminal (for the progress bar).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// injector returns how to make c's fault: on a server bench started (owned.fault), or on a node
// of the fleet.
func injector(c benchConfig, fleet *bench.Fleet, fleetIndex []int, client *bench.Client, srvs *owned) func(context.Context, string) error {
	if f := srvs.fault(c); f != nil {
		return f
	}
	if c.fault == "worker" {
		return func(ctx context.Context, _ string) error {
			_, err := fleet.KillAndRestart(ctx, fleet.Find(node.RoleWorker))
			return err
		}
	}
	// An API node: the crowd moves to the others, and back to it once it listens again.
	return func(ctx context.Context, _ string) error {
		base, err := fleet.KillAndRestart(ctx, fleetIndex[0])
		if err == nil {
			client.SetBase(0, base)
		}
		return err
	}
}

// runNemesis makes a nemesis run (--nemesis) on the deployment bench started, prints what the
// checker found, and fails when it found a violation, with the command that replays the seed.
func runNemesis(ctx context.Context, c benchConfig, fleet *bench.Fleet, fleetIndex []int, client *bench.Client, srvs *owned,
	stdout io.Writer) error {
	strike := srvs.striker(fleet, fleetIndex, client)
	if strike == nil {
		return errors.New("--nemesis: this build cannot strike servers")
	}
	path := c.history
	if path == "" {
		f, err := os.CreateTemp("", "seckill-nemesis-history-*.jsonl")
		if err != nil {
			return err
		}
		path = f.Name()
		f.Close()
	}
	top := c.topology()
	if top.APINodes != len(fleetIndex) || top.Workers != len(fleet.Indexes(node.RoleWorker)) || top.Netem != srvs.badNetworks() {
		return fmt.Errorf("--nemesis: bench started %d API nodes, %d workers (bad networks: %v), not the %+v it drew the schedule for",
			len(fleetIndex), len(fleet.Indexes(node.RoleWorker)), srvs.badNetworks(), top)
	}
	var shards int64
	if top.Redis == redisSpawnCluster {
		shards = 3 // one counter on each master
	}
	n := bench.Nemesis{Seed: c.nemesisSeed, Duration: c.duration, Rate: c.rate, Concurrency: c.sale.Concurrency, Secret: c.secret,
		Topology: top, StockShards: shards, DrainTimeout: c.sale.DrainTimeout, Strike: strike, History: path,
		Provider: c.sale.Provider, Meter: bench.ProcessTree("bench")}
	if n.Provider != nil {
		n.PayWindow = c.sale.PayWindow
	}
	res, err := n.Run(ctx, client)
	res.Replay = c.replay()
	if err != nil {
		return fmt.Errorf("%w (history %s; replay: %s)", err, path, res.Replay)
	}
	if c.jsonOut {
		err = res.WriteJSON(stdout)
	} else {
		err = res.WriteText(stdout)
	}
	if err == nil && !res.OK {
		err = fmt.Errorf("nemesis seed %d did not pass the checker (a violation, or a check undecided); replay: %s", c.nemesisSeed, res.Replay)
		if dir, lerr := srvs.saveLogs(strings.TrimSuffix(path, ".jsonl") + "-servers"); lerr == nil {
			err = fmt.Errorf("%w; the servers' logs: %s", err, dir)
		}
	}
	return err
}

// topology is what c's nemesis strikes: the nodes and the servers bench starts, and the proxies
// it puts before the Redis servers of its own (routeRedis).
func (c benchConfig) topology() bench.Topology {
	return bench.Topology{APINodes: c.spawn, Workers: c.workers, Redis: c.redisFlag, DB: c.dbFlag,
		Netem: strings.HasPrefix(c.redisFlag, redisSpawn)}
}

// replay is the command that makes c's nemesis run again.
func (c benchConfig) replay() string {
	cmd := fmt.Sprintf("seckill bench --nemesis %d --duration %s --rate %d --concurrency %d --spawn %d", c.nemesisSeed, c.duration, c.rate,
		c.sale.Concurrency, c.spawn)
	if c.workers > 0 {
		cmd += fmt.Sprintf(" --workers %d", c.workers)
	}
	for _, f := range []struct{ name, value string }{{"redis", c.redisFlag}, {"db", c.dbFlag}} {
		switch {
		case strings.HasPrefix(f.value, "spawn"):
			cmd += " --" + f.name + " " + f.value
		case f.value != "": // an address may hold a password: not printed
			cmd += " --" + f.name + " ADDRESS"
		}
	}
	if c.minReplicas > 0 {
		cmd += fmt.Sprintf(" --min-replicas %d", c.minReplicas)
	}
	if p := c.payments; p != nil {
		cmd += fmt.Sprintf(" --payments --provider %s --late %g --dup-callbacks %g --forged %g --pay-window %s",
			p.Kind, p.Late, p.Dup, p.Forged, c.sale.PayWindow)
	}
	return cmd
}

// nemesisPayWindow is the payment window of a nemesis's activities with --payments and no
// --pay-window: short enough that the orders left unpaid expire, and their units sell again,
// within the run.
const nemesisPayWindow = 10 * time.Second
