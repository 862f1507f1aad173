package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"seckill/internal/bench"
	"seckill/internal/servers"
)

// benchConfig is what `seckill bench` runs with.
type benchConfig struct {
	url, adminToken, secret string
	db, redis               string        // the in-process server's or the spawned nodes', when there is no url
	spawn                   int           // nodes of the binary to start; 0: serve in this process
	binary                  string        // the binary to spawn
	kill                    string        // "", "api", "worker" or "redis"
	dbOutage                time.Duration // how long the database is down, 0: no outage
	sale                    bench.Sale
	jsonOut                 bool
	history                 string
	plot                    string // SVG file of the run over time
	timeout                 time.Duration
}

// parseBench reads bench's flags. The secrets default to the server's environment variables.
func parseBench(args []string, getenv func(string) string, stderr io.Writer) (benchConfig, error) {
	var c benchConfig
	var arrival, at string
	s := &c.sale
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.url, "url", "", "base `URL` of a running server; empty: start one in this process on a free loopback port")
	fs.StringVar(&c.adminToken, "admin-token", getenv("SECKILL_ADMIN_TOKEN"), "the server's admin `token` (SECKILL_ADMIN_TOKEN)")
	fs.StringVar(&c.secret, "jwt-secret", getenv("SECKILL_JWT_SECRET"), "the server's JWT `secret`, to mint the users' tokens (SECKILL_JWT_SECRET)")
	fs.StringVar(&c.db, "db", "", "the database of the server bench starts (default: SQLite in a temporary directory); spawn:mariadb or spawn:postgres starts one")
	fs.StringVar(&c.redis, "redis", "", "Redis URL or cluster seeds of the server bench starts (default: the embedded gate); spawn starts a redis-server with appendfsync always")
	fs.IntVar(&c.spawn, "spawn", 0, "start this many nodes of --binary (sharing --redis and --db) instead of serving in this process")
	fs.StringVar(&c.binary, "binary", "", "the seckill binary --spawn starts (default: this program)")
	fs.StringVar(&c.kill, "kill", "", "SIGKILL and restart, at --at: api (an API node) or worker (the worker node), with --spawn; redis, with --redis spawn")
	fs.DurationVar(&c.dbOutage, "db-outage", 0, "stop the database (--db spawn:...) at --at for this long, then start it again")
	fs.StringVar(&at, "at", "50%", "when --kill or --db-outage strikes: the share of the clicks answered")
	fs.IntVar(&s.Users, "users", 20_000, "distinct users")
	fs.Int64Var(&s.Stock, "stock", 500, "units on sale (shares of a red packet)")
	fs.IntVar(&s.Concurrency, "concurrency", 64, "requests in flight at most")
	fs.IntVar(&s.Dup, "dup", 1, "extra clicks per user")
	fs.StringVar(&arrival, "arrival", "burst", "burst (every click as soon as a connection is free) or ramp:DURATION (clicks spread evenly)")
	fs.StringVar(&s.Kind, "kind", "item", "item or redpacket")
	fs.Int64Var(&s.PerUserLimit, "per-user-limit", 1, "units one user may buy")
	fs.Int64Var(&s.StockShards, "stock-shards", 0, "split the item's stock into this many counters on Redis Cluster slots (default 1)")
	fs.Int64Var(&s.TotalCents, "total-cents", 0, "red packets: the amount split (default 100 cents per share)")
	fs.Float64Var(&s.Unpaid, "unpaid", 0, "share of the winners who never pay: their orders expire, the units go back and the losers try again")
	fs.DurationVar(&s.PayWindow, "pay-window", 0, "the activity's payment window (needed with --unpaid, at most 10m; default the server's 15m)")
	fs.Uint64Var(&s.Seed, "seed", 1, "orders the clicks; the same seed sends the same sequence")
	fs.StringVar(&s.Line.Admission, "admission", "direct", "direct (grabs race to the gate), queue (a waiting line: the early crowd shuffled, then in order) or lottery (entries, then a draw)")
	fs.Int64Var(&s.Line.AdmitRate, "admit-rate", 0, "queue: tickets the line admits a second (default the server's, 1000)")
	fs.Int64Var(&s.Line.QueueCap, "queue-cap", 0, "queue or lottery: tickets waiting at most (default the server's, 10 × stock)")
	fs.DurationVar(&s.Line.PreQueue, "pre-queue", 0, "queue or lottery: the activity starts this long after it is created; the clicks before form the early crowd (default 3s)")
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
	if s.Line.Lined() && s.Line.PreQueue == 0 {
		s.Line.PreQueue = 3 * time.Second
	}
	if c.timeout <= 0 {
		return c, errors.New("--timeout must be positive")
	}
	if err := c.parseFleet(at, s); err != nil {
		return c, err
	}
	if c.url != "" {
		if c.db != "" || c.redis != "" || c.spawn > 0 || c.dbOutage != 0 {
			return c, errors.New("--db, --redis and --spawn are for the servers bench starts; with --url the server runs already")
		}
		if c.secret == "" || c.adminToken == "" {
			return c, errors.New("--url needs the server's --jwt-secret and --admin-token (or SECKILL_JWT_SECRET and SECKILL_ADMIN_TOKEN)")
		}
	} else {
		c.secret, c.adminToken = randomSecret(), randomSecret() // the in-process server takes these
	}
	s.UserPrefix = fmt.Sprintf("bench-%d-", s.Seed)
	s.Secret = c.secret
	return c, s.Validate()
}

// parseFleet checks the flags of the processes bench starts and the fault it injects.
func (c *benchConfig) parseFleet(at string, s *bench.Sale) error {
	sqlite := c.db == "" || strings.HasPrefix(c.db, "sqlite:")
	switch {
	case c.spawn < 0 || c.spawn > 16:
		return fmt.Errorf("--spawn %d: want 1 to 16 nodes", c.spawn)
	case c.spawn > 1 && (c.redis == "" || sqlite):
		return errors.New("--spawn of several nodes needs --redis and a MySQL or PostgreSQL --db that they share")
	case strings.HasPrefix(c.db, "spawn:") && c.db != dbSpawnMariaDB && c.db != dbSpawnPostgres:
		return fmt.Errorf("--db %q: want %s or %s", c.db, dbSpawnMariaDB, dbSpawnPostgres)
	case c.dbOutage < 0:
		return fmt.Errorf("--db-outage %s: want a positive duration", c.dbOutage)
	case c.dbOutage > 0 && c.kill != "":
		return errors.New("one fault per run: --kill or --db-outage")
	case c.dbOutage > 0 && !strings.HasPrefix(c.db, "spawn:"):
		return errors.New("--db-outage needs --db spawn:mariadb or spawn:postgres: bench stops only a database it started")
	case c.dbOutage > 10*time.Minute:
		return fmt.Errorf("--db-outage %s: at most 10m", c.dbOutage)
	case c.kill == "" && c.dbOutage == 0:
		return nil
	case c.kill != "" && c.kill != "api" && c.kill != "worker" && c.kill != "redis":
		return fmt.Errorf("--kill %q: want api, worker or redis", c.kill)
	case c.kill == "redis" && c.redis != redisSpawn:
		return errors.New("--kill redis needs --redis spawn: bench kills only a redis-server it started")
	case (c.kill == "api" || c.kill == "worker") && c.spawn == 0:
		return errors.New("--kill needs --spawn: bench kills only the nodes it started")
	case c.kill == "worker" && c.redis == "":
		return errors.New("--kill worker needs --redis: the embedded worker lives in the API process (use --kill api)")
	}
	pct, err := strconv.ParseFloat(strings.TrimSuffix(at, "%"), 64)
	if err != nil {
		return fmt.Errorf("--at %q: want a share of the clicks such as 50%%", at)
	}
	kind := c.kill
	if c.dbOutage > 0 {
		kind = "db"
	}
	s.Fault = &bench.Fault{Kind: kind, At: pct / 100}
	return nil
}

// The values of --redis and --db that make bench start the server itself.
const (
	redisSpawn      = "spawn"
	dbSpawnMariaDB  = "spawn:mariadb"
	dbSpawnPostgres = "spawn:postgres"
)

// restartable is a server bench started and may kill.
type restartable interface {
	Kill()
	Restart() error
}

// owned are the servers bench started for the run (--redis spawn, --db spawn:...).
type owned struct {
	redis, db restartable
	close     []func()
}

func (o *owned) stop() {
	for i := len(o.close) - 1; i >= 0; i-- {
		o.close[i]()
	}
}

// startServers starts the servers c asks bench to run, and points c.redis and c.db at them.
func startServers(c *benchConfig) (*owned, error) {
	o := &owned{}
	if c.redis == redisSpawn {
		dir, err := os.MkdirTemp("", "seckill-bench-redis-")
		if err != nil {
			return o, err
		}
		o.close = append(o.close, func() { os.RemoveAll(dir) })
		srv, err := servers.StartRedis(dir, servers.RedisOptions{AOF: true, Fsync: "always"})
		if err != nil {
			return o, err
		}
		o.close = append(o.close, srv.Stop)
		o.redis, c.redis = srv, srv.URL()
	}
	var start func() (database, error)
	switch c.db {
	case dbSpawnMariaDB:
		start = func() (database, error) { return servers.StartMariaDB() }
	case dbSpawnPostgres:
		start = func() (database, error) { return servers.StartPostgres() }
	default:
		return o, nil
	}
	srv, err := start()
	if err != nil {
		return o, err
	}
	o.close = append(o.close, srv.Close)
	if c.db, err = srv.CreateDatabase("bench"); err != nil {
		return o, err
	}
	o.db = srv
	return o, nil
}

// database is a database server bench started.
type database interface {
	restartable
	CreateDatabase(name string) (dsn string, err error)
	Close()
}

// benchCmd runs `seckill bench`: the exit status is non-zero when the run could not be made or
// the checker found a violation.
func benchCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c, err := parseBench(args, getenv, stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()

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
	if f := c.sale.Fault; f != nil {
		f.Inject = injector(f.Kind, c.dbOutage, fleet, fleetIndex, client, srvs)
	}
	if isTerminal(stderr) {
		c.sale.Progress = stderr
	}
	res, history, err := c.sale.Run(ctx, client)
	if path, herr := writeHistory(c.history, history); herr != nil {
		err = errors.Join(err, herr)
	} else {
		res.History = path
	}
	if err != nil {
		return err
	}
	res.Mode, res.Nodes = mode, len(bases)
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
		err = fmt.Errorf("the checker found violations: oversell %d, undersell %d, duplicates %d, lost %d, shares off %d cents, leaderboard off %d",
			res.Oversell, res.Undersell, res.Duplicates, res.Lost, res.SharesOff, res.BoardOff)
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
	env := map[string]string{"SECKILL_ADDR": "127.0.0.1:0", "SECKILL_DB": db, "SECKILL_REDIS": c.redis,
		"SECKILL_JWT_SECRET": c.secret, "SECKILL_ADMIN_TOKEN": c.adminToken, "SECKILL_LOG_LEVEL": "error",
		"SECKILL_DEMO": "0"}
	cfg, err := parseServe(nil, func(k string) string { return env[k] }, stderr)
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

// injector returns how to make the fault of kind: SIGKILL and restart an API node, the worker
// node or redis-server, or stop the database for outage.
func injector(kind string, outage time.Duration, fleet *bench.Fleet, fleetIndex []int, client *bench.Client, srvs *owned) func(context.Context) error {
	restart := func(s restartable, pause time.Duration) func(context.Context) error {
		return func(ctx context.Context) error {
			s.Kill()
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
			return s.Restart()
		}
	}
	switch kind {
	case "redis":
		return restart(srvs.redis, 0)
	case "db":
		return restart(srvs.db, outage)
	case "worker":
		return func(ctx context.Context) error {
			_, err := fleet.KillAndRestart(ctx, fleet.Find(roleWorker))
			return err
		}
	default: // an API node: the crowd moves to the others, and back to it once it listens again
		return func(ctx context.Context) error {
			base, err := fleet.KillAndRestart(ctx, fleetIndex[0])
			if err == nil {
				client.SetBase(0, base)
			}
			return err
		}
	}
}

// startFleet starts c.spawn nodes of the binary on c.redis and c.db (a SQLite file in a temporary
// directory when there is neither), plus a worker node when the worker is to be killed: then the
// others serve only the API.
func startFleet(ctx context.Context, c benchConfig, stderr io.Writer) (*bench.Fleet, error) {
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
	roles := make([]string, c.spawn)
	for i := range roles {
		roles[i] = roleAll
		if c.kill == "worker" {
			roles[i] = roleAPI
		}
	}
	if c.kill == "worker" {
		roles = append(roles, roleWorker)
	}
	env := []string{"SECKILL_DB=" + db, "SECKILL_REDIS=" + c.redis, "SECKILL_JWT_SECRET=" + c.secret,
		"SECKILL_ADMIN_TOKEN=" + c.adminToken, "SECKILL_LOG_LEVEL=error", "SECKILL_DEMO=0",
		"SECKILL_CLAIM_IDLE=3s"} // a killed worker's grabs are taken over within the drain
	return bench.StartFleet(ctx, exe, env, roles, stderr)
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
