package redisstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"seckill/internal/sale"
)

// Spec is a parsed SECKILL_REDIS: one server, the seeds of a Redis Cluster, or the sentinels of
// a master they watch, with the credentials and TLS of the data nodes.
//
//	redis://[user:pass@]host:port[/db]           one server (rediss:// with TLS)
//	redis://[user:pass@]host:port,host:port,...  a Redis Cluster's seeds (rediss:// with TLS)
//	host:port,host:port,...                      the same, without credentials
//	sentinel://[user:pass@]host:port,.../MASTER  Sentinel (sentinels:// with TLS to every node)
//
// Query parameters: ca (a PEM file of the CAs the servers' certificates are checked against;
// default the system's), db (a Sentinel master's database), sentinel_user and sentinel_password
// (the sentinels' own credentials, when they differ from the data nodes').
type Spec struct {
	Kind     string   // "server", "cluster" or "sentinel"
	Addrs    []string // host:port of the server, the seeds or the sentinels
	Master   string   // the master's name (Sentinel)
	DB       int
	Username string
	Password string
	TLS      *tls.Config // nil: plain TCP

	SentinelUsername, SentinelPassword string
}

// The kinds of Spec.
const (
	KindServer   = "server"
	KindCluster  = "cluster"
	KindSentinel = "sentinel"
)

// forms is how an error says what a spec may be.
const forms = "want redis://host:port/db, redis://host:port,host:port (a cluster) or sentinel://host:port,host:port/MASTER"

// ParseSpec reads a SECKILL_REDIS value. Errors: sale.ErrInvalid, naming what is wrong.
func ParseSpec(spec string) (Spec, error) {
	bad := func(format string, args ...any) (Spec, error) {
		return Spec{}, fmt.Errorf("%w: redis %q: %s", sale.ErrInvalid, redactSpec(spec), fmt.Sprintf(format, args...))
	}
	scheme, rest, hasScheme := strings.Cut(spec, "://")
	if !hasScheme {
		rest, scheme = spec, ""
	}
	var s Spec
	switch scheme {
	case "":
		s.Kind = KindCluster
	case "redis", "rediss":
		s.Kind = KindServer
	case "sentinel", "sentinels":
		s.Kind = KindSentinel
	default:
		return bad("unknown scheme; %s", forms)
	}
	// The host part may list several addresses, which url.Parse refuses: cut it out by hand.
	rest, rawQuery, _ := strings.Cut(rest, "?")
	authority, path, _ := strings.Cut(rest, "/")
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		if scheme == "" {
			return bad("credentials need a scheme: redis://user:pass@host:port,host:port")
		}
		info, err := url.Parse("x://" + authority[:at] + "@h")
		if err != nil || info.User == nil {
			return bad("malformed user:password")
		}
		s.Username = info.User.Username()
		s.Password, _ = info.User.Password()
		authority = authority[at+1:]
	}
	for _, a := range strings.Split(authority, ",") {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" {
			return bad("%q is not host:port; %s", a, forms)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return bad("%q has no valid port", a)
		}
		s.Addrs = append(s.Addrs, a)
	}
	if s.Kind == KindServer && len(s.Addrs) > 1 {
		s.Kind = KindCluster
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return bad("malformed query: %v", err)
	}
	switch s.Kind {
	case KindServer:
		if path != "" {
			if s.DB, err = strconv.Atoi(path); err != nil || s.DB < 0 {
				return bad("the database %q is not a number", path)
			}
		}
	case KindCluster:
		if path != "" && path != "0" {
			return bad("a cluster has only database 0")
		}
	case KindSentinel:
		if path == "" {
			return bad("sentinel:// needs the master's name: sentinel://host:port,host:port/MASTER")
		}
		s.Master = path
		s.SentinelUsername, s.SentinelPassword = q.Get("sentinel_user"), q.Get("sentinel_password")
		if d := q.Get("db"); d != "" {
			if s.DB, err = strconv.Atoi(d); err != nil || s.DB < 0 {
				return bad("db=%q is not a number", d)
			}
		}
	}
	for k := range q {
		switch k {
		case "ca", "db", "sentinel_user", "sentinel_password":
		default:
			return bad("unknown parameter %q", k)
		}
	}
	if scheme == "rediss" || scheme == "sentinels" {
		host, _, _ := net.SplitHostPort(s.Addrs[0])
		s.TLS = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host}
		if ca := q.Get("ca"); ca != "" {
			pem, err := os.ReadFile(ca)
			if err != nil {
				return bad("ca: %v", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return bad("ca %s holds no PEM certificate", ca)
			}
			s.TLS.RootCAs = pool
		}
	} else if q.Has("ca") {
		return bad("ca is for TLS: rediss:// or sentinels://")
	}
	return s, nil
}

// redactSpec hides a password in an error message.
func redactSpec(spec string) string {
	scheme, rest, ok := strings.Cut(spec, "://")
	if !ok {
		return spec
	}
	if at := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@"); at >= 0 {
		user, _, _ := strings.Cut(rest[:at], ":")
		rest = user + ":xxx" + rest[at:]
	}
	return scheme + "://" + rest
}

// The client's timeouts. A dial is tried once and given up quickly: a refused or silent node is
// a node that fails over, and the guard retries within the call's deadline on the cluster's new
// map (or the master the sentinels name) rather than have the client wait out backoffs on the
// dead node. (A Sentinel client's failed dial of the master fails the connection's first use
// instead: see masterDialer.) Calls honour their context's deadline, so a guard's deadline
// bounds a call to a Redis that hangs.
const (
	dialTimeout = 500 * time.Millisecond
	// stateEvery is how stale a cluster client's slot map may get while nothing goes wrong
	// (go-redis's default is a minute); a topology event reloads it at once.
	stateEvery = 2 * time.Second
	// The client follows MOVED and ASK itself and retries a refused node a few times, pausing
	// between tries; the pauses stay short (go-redis's own go up to half a second each), so that
	// one call never outlasts the guard's deadline on a dead node: the guard retries it on the
	// reloaded map instead. (A Sentinel client whose pauses were go-redis's had its calls to a
	// dead master abandoned at the guard's deadline with no error yet, which opened the breaker:
	// TestSentinelFailoverMidSale.)
	minRetryBackoff = 2 * time.Millisecond
	maxRetryBackoff = 20 * time.Millisecond
)

// An Option changes how Dial connects.
type Option func(*router)

// Via sends every connection to a Redis server whose address is a key of routes to the address
// it maps to instead: a lab's bad network (a netfault proxy, which the nemesis strikes) between
// this client and each server, which the servers' own links (the cluster bus, replication, the
// sentinels' watch) do not cross. The keys are the servers' own addresses, as the spec, the
// cluster's map and redirections, and the sentinels name them; a server not in routes is
// dialled directly. A routed dial is given up after the Cluster's and Sentinel's dial timeout,
// whatever the kind. A nil or empty routes changes nothing.
func Via(routes map[string]string) Option {
	return func(r *router) { r.routes = routes }
}

// router dials a Redis server: at its route's address when it has one, with TLS when tls is set
// (checked against the server's own name, not the route's).
type router struct {
	routes map[string]string
	tls    *tls.Config
}

// newRouter dials the servers of s, as opts say.
func newRouter(s Spec, opts ...Option) router {
	r := router{tls: s.TLS}
	for _, o := range opts {
		o(&r)
	}
	return r
}

func (r router) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	to, routed := r.routes[addr]
	if !routed {
		to = addr
	}
	nd := &net.Dialer{Timeout: dialTimeout}
	if r.tls == nil {
		return nd.DialContext(ctx, network, to)
	}
	cfg := r.tls
	if host, _, err := net.SplitHostPort(addr); err == nil && cfg.ServerName == "" && routed {
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	return (&tls.Dialer{NetDialer: nd, Config: cfg}).DialContext(ctx, network, to)
}

// dialer is r's dial when r has routes, else nil: go-redis's own dialer.
func (r router) dialer() func(context.Context, string, string) (net.Conn, error) {
	if len(r.routes) == 0 {
		return nil
	}
	return r.dial
}

// Dial connects to the Redis of spec (see Spec) and checks that it answers.
func Dial(ctx context.Context, spec string, opts ...Option) (redis.UniversalClient, error) {
	s, err := ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	r := newRouter(s, opts...)
	var rdb redis.UniversalClient
	switch s.Kind {
	case KindServer:
		rdb = redis.NewClient(&redis.Options{Addr: s.Addrs[0], DB: s.DB, Username: s.Username, Password: s.Password,
			TLSConfig: s.TLS, DisableIdentity: true, ContextTimeoutEnabled: true, Dialer: r.dialer()})
	case KindCluster:
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: s.Addrs, Username: s.Username, Password: s.Password,
			TLSConfig: s.TLS, DisableIdentity: true, ContextTimeoutEnabled: true, Dialer: r.dialer(),
			DialTimeout: dialTimeout, DialerRetries: 1, ClusterStateReloadInterval: stateEvery,
			MinRetryBackoff: minRetryBackoff, MaxRetryBackoff: maxRetryBackoff})
	case KindSentinel: // a client of the master the sentinels name: see masterDialer
		rdb = redis.NewClient(&redis.Options{Addr: sentinelMaster, Dialer: newMasterDialer(s, r).Dial,
			Username: s.Username, Password: s.Password, DB: s.DB, TLSConfig: s.TLS,
			DisableIdentity: true, ContextTimeoutEnabled: true,
			DialTimeout: dialTimeout, DialerRetries: 1, MinRetryBackoff: minRetryBackoff, MaxRetryBackoff: maxRetryBackoff,
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	}
	ping, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ping).Err(); err != nil {
		rdb.Close()
		return nil, sale.Busy(err, "redis %s", redactSpec(spec))
	}
	return rdb, nil
}

// sentinelMaster is the address of a Sentinel client's options: not one, as its dialer (see
// masterDialer) connects to the master the sentinels name.
const sentinelMaster = "sentinel-master"

// failover reports whether c is a Sentinel client.
func failover(c *redis.Client) bool { return c.Options().Addr == sentinelMaster }

// LogTo sends go-redis's own messages (a dial that failed, a reconnect) to log, at debug level:
// during a failover it writes one per refused dial, which would drown the node's log, and the
// node says what matters itself (the guard's level, the worker's retries). go-redis keeps one
// logger for the whole process, so the last call wins.
func LogTo(log *slog.Logger) { redis.SetLogger(redisLog{log}) }

type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	if l.log.Enabled(ctx, slog.LevelDebug) {
		l.log.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
	}
}
