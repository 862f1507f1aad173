// Package redistest starts real redis-server processes for integration tests.
//
// Redis starts in well under a second, so unlike dbtest's databases there is no shared server:
// every call to Start (or StartCluster) starts new servers, in temp dirs of the test, on free
// loopback ports, and stops them when the test ends. The package never skips: if a server cannot
// start, the test fails with the tail of the server's log. The servers are started with
// Pdeathsig and their own process group, so they die with the test process even if it is killed.
// The servers are launched by internal/servers, which seckill bench uses too; this package adds
// what tests need on top: failing the test, temp dirs and cleanups, and Redis Cluster.
//
//	srv := redistest.Start(t, redistest.Options{AOF: true, Fsync: "always"})
//	cfg.Redis = srv.URL()
//
//	cluster := redistest.StartCluster(t)
//	cfg.Redis = cluster.Seeds()
package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"seckill/internal/servers"

	"github.com/redis/go-redis/v9"

	"seckill/internal/testtier"
)

const (
	okTimeout = 20 * time.Second // how long WaitOK waits for cluster_state:ok on every node

	// nodeTimeout is the cluster-node-timeout of cluster nodes, in milliseconds. Redis's default
	// of 15 s would make fault tests slow: a killed master is flagged as failed only after it,
	// and a failed master that holds slots is cleared only 2 node timeouts after it was flagged.
	nodeTimeout = 3000

	installHint = "(`make test` installs the packages the tests need, redis-server and redis-tools among them)"
)

// Options are the options of a single server started by Start.
type Options struct {
	AOF   bool   // --appendonly yes: writes are logged and reloaded by Restart
	Fsync string // with AOF, "always" or "everysec" (the default when empty); "no" is accepted too
}

// Server is one redis-server started by Start or StartCluster. It is stopped when the test
// that started it ends; its methods are for fault tests.
type Server struct {
	redis *servers.Redis
}

// Start starts a redis-server with opts on a free port of 127.0.0.1, in a temp dir of t, and
// waits until it answers PING. The server is stopped when t ends. Start fails t if the server
// cannot start.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	persistence, err := servers.RedisOptions(opts).Args()
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return startServer(t, persistence, servers.FreePort)
}

// StartWith is Start with more of redis-server's command line (ACL users, TLS), one word an
// element: "--user", "app", "on", ">secret", "~*", "+@all".
func StartWith(t testing.TB, opts Options, extra ...string) *Server {
	t.Helper()
	persistence, err := servers.RedisOptions(opts).Args()
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return startServer(t, append(persistence, extra...), servers.FreePort)
}

// StartReplica starts a redis-server that replicates master, with more of the command line
// (a replica of a master with ACL users needs them, and --masteruser and --masterauth), and waits
// until its link to the master is up. It is stopped when t ends.
func StartReplica(t testing.TB, master *Server, extra ...string) *Server {
	t.Helper()
	testtier.NeedsServer(t, "redis-server")
	logf := func(format string, args ...any) { t.Logf("redistest: "+format, args...) }
	r, err := servers.StartRedisReplica(t.TempDir(), master.Addr(), append([]string{"--appendonly", "no"}, extra...), logf)
	if err != nil {
		t.Fatalf("redistest: cannot start a replica: %v\n%s", err, installHint)
	}
	t.Cleanup(r.Stop)
	return &Server{redis: r}
}

// startServer starts one redis-server with extra arguments on a port from pick, trying again
// with another port if the one picked was taken meanwhile. It fails t if the server cannot start.
func startServer(t testing.TB, extra []string, pick func() (int, error)) *Server {
	t.Helper()
	testtier.NeedsServer(t, "redis-server")
	dir := t.TempDir() // removed after the server is stopped: cleanups run last-registered first
	logf := func(format string, args ...any) { t.Logf("redistest: "+format, args...) }
	redis, err := servers.StartRedisArgs(dir, extra, pick, logf)
	if err != nil {
		t.Fatalf("redistest: cannot start redis-server: %v\n%s", err, installHint)
	}
	t.Cleanup(redis.Stop)
	return &Server{redis: redis}
}

// Addr returns the server's address, "127.0.0.1:PORT".
func (s *Server) Addr() string { return s.redis.Addr() }

// URL returns the server's URL, "redis://127.0.0.1:PORT/0".
func (s *Server) URL() string { return s.redis.URL() }

// Kill kills the server with SIGKILL, as a crash would, and waits for it to exit. It does
// nothing if the server is not running.
func (s *Server) Kill() { s.redis.Kill() }

// Freeze blocks the server for d (DEBUG SLEEP; a cluster started with Debug) and returns when it
// answers again: a replica frozen so takes no writes from its master meanwhile.
func (s *Server) Freeze(t testing.TB, d time.Duration) {
	t.Helper()
	if err := s.redis.Freeze(d); err != nil {
		t.Errorf("redistest: freeze redis-server: %v", err)
	}
}

// Restart starts the server again with the same dir, port and options, killing it first if it
// is still running, and waits until it answers PING: with AOF, the data written before is
// reloaded by then. A cluster node rejoins its cluster, but only after a while; call the
// cluster's WaitOK before using it. Restart fails t if the server does not come up.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.redis.Restart(); err != nil {
		t.Fatalf("redistest: cannot restart redis-server: %v\n%s", err, installHint)
	}
}

// Stop shuts the server down with SIGTERM, and SIGKILL if it has not exited after 5 s. It does
// nothing if the server is not running. The test's cleanup calls it; a test may call it earlier,
// and may Restart the server after it.
func (s *Server) Stop() { s.redis.Stop() }

// Pause freezes the server (SIGSTOP), as when a server hangs; Resume thaws it. The test's
// cleanup resumes it before stopping it.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	if err := s.redis.Pause(); err != nil {
		t.Fatalf("redistest: pause redis-server: %v", err)
	}
	t.Cleanup(func() { s.redis.Resume() })
}

// Resume thaws a paused server.
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	if err := s.redis.Resume(); err != nil {
		t.Fatalf("redistest: resume redis-server: %v", err)
	}
}

// Cluster is a Redis Cluster started by StartCluster or StartClusterWith and stopped when the
// test that started it ends.
type Cluster struct {
	*servers.RedisCluster
	nodes []*Server
	opts  servers.ClusterOptions
}

// StartCluster starts three redis-server nodes in cluster mode on free ports of 127.0.0.1 (whose
// cluster bus ports, port+10000, are free too), assigns the hash slots among them with
// redis-cli --cluster create, and waits until every node reports cluster_state:ok. The nodes have
// no persistence and a cluster-node-timeout of 3 s. The cluster is stopped when t ends.
// StartCluster fails t if the cluster cannot be formed.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	return StartClusterWith(t, servers.ClusterOptions{NodeTimeout: nodeTimeout * time.Millisecond})
}

// StartClusterWith is StartCluster with the shape of o: more masters, replicas (for failover
// tests), AOF, the DEBUG command.
func StartClusterWith(t testing.TB, o servers.ClusterOptions) *Cluster {
	t.Helper()
	testtier.NeedsServer(t, "a Redis Cluster")
	logf := func(format string, args ...any) { t.Logf("redistest: "+format, args...) }
	rc, err := servers.StartRedisCluster(t.TempDir(), o, logf)
	if err != nil {
		t.Fatalf("redistest: cannot start a Redis Cluster: %v\n%s", err, installHint)
	}
	c := &Cluster{RedisCluster: rc, opts: o}
	for i := range rc.Len() {
		n := &Server{redis: rc.Node(i)}
		c.nodes = append(c.nodes, n)
		t.Cleanup(func() { n.redis.Resume(); n.redis.Stop() })
	}
	return c
}

// AddMaster adds a master without slots to the running cluster (redis-cli --cluster add-node)
// and returns its index for Node; Reshard or MigrateSlot then give it slots.
func (c *Cluster) AddMaster(t testing.TB) int {
	t.Helper()
	logf := func(format string, args ...any) { t.Logf("redistest: "+format, args...) }
	i, err := c.RedisCluster.AddMaster(t.TempDir(), c.opts, logf)
	if err != nil {
		t.Fatalf("redistest: add a master: %v", err)
	}
	n := &Server{redis: c.RedisCluster.Node(i)}
	c.nodes = append(c.nodes, n)
	t.Cleanup(n.redis.Stop)
	return i
}

// Reshard moves slots slots from the other masters to node to (redis-cli --cluster reshard).
func (c *Cluster) Reshard(t testing.TB, to, slots int) {
	t.Helper()
	if err := c.RedisCluster.Reshard(to, slots, c.opts); err != nil {
		t.Fatalf("redistest: %v", err)
	}
}

// MasterOfKey is the index (for Node) of the master that serves key's slot.
func (c *Cluster) MasterOfKey(t testing.TB, key string) int {
	t.Helper()
	slot, err := c.Slot(key)
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.MasterOf(slot)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Node returns node i for fault tests: of a cluster of three masters without replicas, 0 to 2.
// A node killed and restarted keeps its place in the cluster (nodes.conf is kept) but not its
// data unless it has AOF; call WaitOK after restarting it.
func (c *Cluster) Node(i int) *Server { return c.nodes[i] }

// WaitOK waits until every running node reports cluster_state:ok, as after StartCluster or after
// a node's Restart. After a master was flagged as failed (a node timeout after it went down) the
// others clear the flag only two node timeouts after they set it, so this can take several
// seconds. WaitOK fails t if no node is running or the cluster is not ok after 20 s.
func (c *Cluster) WaitOK(t testing.TB) {
	t.Helper()
	if err := c.RedisCluster.WaitOK(okTimeout); err != nil {
		t.Fatalf("redistest: %v", err)
	}
}

// UsedMemory reads the bytes Redis says it uses (INFO memory, used_memory) through rdb.
func UsedMemory(t testing.TB, rdb redis.UniversalClient) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("used_memory %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatal("INFO memory has no used_memory")
	return 0
}

// Sentinels are the sentinels started by StartSentinels, stopped when the test ends.
type Sentinels struct{ *servers.Sentinels }

// StartSentinels starts sentinels (three by default) watching master, and waits until they know
// each other and its replicas. StartSentinels fails t if they cannot start.
func StartSentinels(t testing.TB, master *Server, o servers.SentinelOptions) *Sentinels {
	t.Helper()
	testtier.NeedsServer(t, "Redis Sentinel")
	logf := func(format string, args ...any) { t.Logf("redistest: "+format, args...) }
	s, err := servers.StartSentinels(t.TempDir(), master.Addr(), o, logf)
	if err != nil {
		t.Fatalf("redistest: cannot start the sentinels: %v\n%s", err, installHint)
	}
	t.Cleanup(s.Stop)
	return &Sentinels{s}
}

// Spec is the SECKILL_REDIS of a client logging in as userinfo ("user:pass@", or empty).
func (s *Sentinels) Spec(userinfo string) string {
	return "sentinel://" + userinfo + strings.Join(s.Addrs(), ",") + "/" + s.Name()
}
