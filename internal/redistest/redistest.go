// Package redistest starts real redis-server processes for integration tests.
//
// Redis starts in well under a second, so unlike mysqltest and pgtest there is no shared server:
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
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"seckill/internal/servers"

	"github.com/redis/go-redis/v9"
)

const (
	clusterTimeout = 30 * time.Second // how long redis-cli --cluster create may take
	okTimeout      = 20 * time.Second // how long WaitOK waits for cluster_state:ok on every node

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

// startServer starts one redis-server with extra arguments on a port from pick, trying again
// with another port if the one picked was taken meanwhile. It fails t if the server cannot start.
func startServer(t testing.TB, extra []string, pick func() (int, error)) *Server {
	t.Helper()
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

// Cluster is a Redis Cluster of three masters, without replicas, started by StartCluster and
// stopped when the test that started it ends.
type Cluster struct {
	nodes []*Server
}

// StartCluster starts three redis-server nodes in cluster mode on free ports of 127.0.0.1 (whose
// cluster bus ports, port+10000, are free too), assigns the hash slots among them with
// redis-cli --cluster create, and waits until every node reports cluster_state:ok. The nodes have
// no persistence and a cluster-node-timeout of 3 s. The cluster is stopped when t ends.
// StartCluster fails t if the cluster cannot be formed.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	cli, err := servers.FindBinary("redis-cli", "/usr/bin/redis-cli")
	if err != nil {
		t.Fatalf("redistest: %v\n%s", err, installHint)
	}
	c := &Cluster{}
	for range 3 {
		c.nodes = append(c.nodes, startServer(t, []string{
			"--appendonly", "no",
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf", // in --dir, each node's own
			"--cluster-node-timeout", strconv.Itoa(nodeTimeout),
		}, freeClusterPort))
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create %s: %v\n%s", c.Seeds(), err, servers.Tail(out))
	}
	c.WaitOK(t)
	return c
}

// Addrs returns the addresses of the three nodes, "127.0.0.1:PORT", in the order of Node.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Seeds returns the addresses of the nodes separated by commas, the form SECKILL_REDIS takes
// for a cluster.
func (c *Cluster) Seeds() string { return strings.Join(c.Addrs(), ",") }

// Node returns node i, 0 to 2, for fault tests. A node killed and restarted keeps its place in
// the cluster (nodes.conf is kept) but not its data; call WaitOK after restarting it.
func (c *Cluster) Node(i int) *Server { return c.nodes[i] }

// WaitOK waits until every node reports cluster_state:ok, as after StartCluster or after a
// node's Restart. After a master was flagged as failed (3 s after it went down) the others
// clear the flag only 6 s after they set it, so this can take several seconds. WaitOK fails t if
// a node is not running or the cluster is not ok after 20 s.
func (c *Cluster) WaitOK(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(okTimeout)
	for i, n := range c.nodes {
		for {
			if !n.redis.Running() {
				t.Fatalf("redistest: cluster node %d (%s) is not running", i, n.Addr())
			}
			info, err := servers.RedisCommand(n.Addr(), "CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				if err == nil {
					err = errors.New(strings.TrimSpace(info))
				}
				nodes, nerr := servers.RedisCommand(n.Addr(), "CLUSTER", "NODES")
				if nerr != nil {
					nodes = nerr.Error()
				}
				t.Fatalf("redistest: cluster node %d (%s) is not ok after %v: %v\nCLUSTER NODES:\n%s\nserver log ends with:\n%s",
					i, n.Addr(), okTimeout, err, strings.TrimSpace(nodes), servers.TailFile(n.redis.LogPath()))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// freeClusterPort returns a TCP port on 127.0.0.1 that was free a moment ago, as was port+10000,
// the cluster bus port of a node listening on it.
func freeClusterPort() (int, error) {
	var held []net.Listener // ports rejected are held until the end, so they are not offered again
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("find free port: %w", err)
		}
		held = append(held, l)
		port := l.Addr().(*net.TCPAddr).Port
		if port+10000 > 65535 {
			continue
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		if err != nil {
			continue
		}
		held = append(held, bus)
		return port, nil
	}
	return 0, errors.New("find free port: no port found whose cluster bus port (port+10000) is free too")
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
