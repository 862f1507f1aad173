// Package redistest starts real redis-server processes for integration tests.
//
// Redis starts in well under a second, so unlike mysqltest and pgtest there is no shared server:
// every call to Start (or StartCluster) starts new servers, in temp dirs of the test, on free
// loopback ports, and stops them when the test ends. The package never skips: if a server cannot
// start, the test fails with the tail of the server's log. The servers are started with
// Pdeathsig and their own process group, so they die with the test process even if it is killed.
//
//	srv := redistest.Start(t, redistest.Options{AOF: true, Fsync: "always"})
//	cfg.Redis = srv.URL()
//
//	cluster := redistest.StartCluster(t)
//	cfg.Redis = cluster.Seeds()
package redistest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"seckill/internal/servertest"
)

const (
	readyTimeout   = 20 * time.Second // how long a starting server may take to answer PING
	stopTimeout    = 5 * time.Second  // how long Stop waits after SIGTERM before SIGKILL
	clusterTimeout = 30 * time.Second // how long redis-cli --cluster create may take
	okTimeout      = 20 * time.Second // how long WaitOK waits for cluster_state:ok on every node
	ioTimeout      = 2 * time.Second  // dial, write and read timeout of one internal command
	startAttempts  = 3                // tries with fresh ports when a port was taken meanwhile

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

// args returns the persistence part of redis-server's command line for o.
func (o Options) args() ([]string, error) {
	if !o.AOF {
		if o.Fsync != "" {
			return nil, fmt.Errorf("Options.Fsync is %q but AOF is off", o.Fsync)
		}
		return []string{"--appendonly", "no"}, nil
	}
	fsync := o.Fsync
	switch fsync {
	case "":
		fsync = "everysec"
	case "always", "everysec", "no":
	default:
		return nil, fmt.Errorf("Options.Fsync is %q, want \"always\" or \"everysec\"", o.Fsync)
	}
	return []string{"--appendonly", "yes", "--appendfsync", fsync}, nil
}

// Server is one redis-server started by Start or StartCluster. It is stopped when the test
// that started it ends; its methods are for fault tests.
type Server struct {
	bin  string   // path of redis-server
	dir  string   // working dir: log, AOF, nodes.conf
	port int      // TCP port on 127.0.0.1
	args []string // command line after the binary

	mu   sync.Mutex
	proc *servertest.Process // the last process started
}

// Start starts a redis-server with opts on a free port of 127.0.0.1, in a temp dir of t, and
// waits until it answers PING. The server is stopped when t ends. Start fails t if the server
// cannot start.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	persistence, err := opts.args()
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return startServer(t, persistence, servertest.FreePort)
}

// startServer starts one redis-server with extra arguments on a port from pick, trying again
// with another port if the one picked was taken meanwhile. It fails t if the server cannot start.
func startServer(t testing.TB, extra []string, pick func() (int, error)) *Server {
	t.Helper()
	bin, err := servertest.FindBinary("redis-server", "/usr/bin/redis-server")
	if err != nil {
		t.Fatalf("redistest: %v\n%s", err, installHint)
	}
	dir := t.TempDir() // removed after the server is stopped: cleanups run last-registered first
	logPath := filepath.Join(dir, "redis.log")
	for attempt := 1; ; attempt++ {
		port, err := pick()
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		s := &Server{bin: bin, dir: dir, port: port}
		s.args = append([]string{
			"--port", strconv.Itoa(port),
			"--bind", "127.0.0.1",
			"--dir", dir,
			"--logfile", logPath,
			"--daemonize", "no",
			"--save", "",
		}, extra...)
		s.mu.Lock()
		err = s.launch()
		s.mu.Unlock()
		if err == nil {
			t.Cleanup(s.Stop)
			return s
		}
		if attempt < startAttempts && strings.Contains(err.Error(), "Address already in use") {
			t.Logf("redistest: port %d was taken, trying another: %v", port, err)
			// Start afresh: a cluster node has already written nodes.conf when it finds its bus
			// port taken.
			if err := os.RemoveAll(dir); err != nil {
				t.Fatalf("redistest: %v", err)
			}
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatalf("redistest: %v", err)
			}
			continue
		}
		t.Fatalf("redistest: cannot start redis-server: %v\n%s", err, installHint)
	}
}

// Addr returns the server's address, "127.0.0.1:PORT".
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL returns the server's URL, "redis://127.0.0.1:PORT/0".
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Kill kills the server with SIGKILL, as a crash would, and waits for it to exit. It does
// nothing if the server is not running.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc.Kill()
}

// Restart starts the server again with the same dir, port and options, killing it first if it
// is still running, and waits until it answers PING: with AOF, the data written before is
// reloaded by then. A cluster node rejoins its cluster, but only after a while; call the
// cluster's WaitOK before using it. Restart fails t if the server does not come up.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc.Kill()
	if err := s.launch(); err != nil {
		t.Fatalf("redistest: cannot restart redis-server: %v\n%s", err, installHint)
	}
}

// Stop shuts the server down with SIGTERM, and SIGKILL if it has not exited after 5 s. It does
// nothing if the server is not running. The test's cleanup calls it; a test may call it earlier,
// and may Restart the server after it.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc.Stop(syscall.SIGTERM, stopTimeout)
}

// running reports whether the server's process is running.
func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && !s.proc.Exited()
}

// launch starts redis-server and waits until it answers PING. The caller holds s.mu.
func (s *Server) launch() error {
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.dir
	// redis-server writes to --logfile itself; its stdout and stderr, where it reports a bad
	// command line before it opens the log, go to the same file.
	p, err := servertest.Launch(cmd, filepath.Join(s.dir, "redis.log"), func(p *servertest.Process) error {
		return waitReady(p, s.Addr())
	})
	if err != nil {
		return fmt.Errorf("redis-server on port %d: %w", s.port, err)
	}
	s.proc = p
	return nil
}

// waitReady sends PING to addr until it answers PONG, p exits or readyTimeout passes. A server
// loading its AOF answers LOADING until it is done.
func waitReady(p *servertest.Process, addr string) error {
	return p.WaitReady(readyTimeout, 50*time.Millisecond, func() error {
		// If the port was taken by another program, which might accept the connection and never
		// answer, the server's exit aborts the PING.
		reply, err := command(p.Done(), addr, "PING")
		if err == nil && reply != "PONG" {
			err = fmt.Errorf("PING answered %q", reply)
		}
		return err
	})
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
	cli, err := servertest.FindBinary("redis-cli", "/usr/bin/redis-cli")
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
		t.Fatalf("redistest: redis-cli --cluster create %s: %v\n%s", c.Seeds(), err, servertest.Tail(out))
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
			if !n.running() {
				t.Fatalf("redistest: cluster node %d (%s) is not running", i, n.Addr())
			}
			info, err := command(nil, n.Addr(), "CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				if err == nil {
					err = errors.New(strings.TrimSpace(info))
				}
				nodes, nerr := command(nil, n.Addr(), "CLUSTER", "NODES")
				if nerr != nil {
					nodes = nerr.Error()
				}
				t.Fatalf("redistest: cluster node %d (%s) is not ok after %v: %v\nCLUSTER NODES:\n%s\nserver log ends with:\n%s",
					i, n.Addr(), okTimeout, err, strings.TrimSpace(nodes), servertest.TailFile(filepath.Join(n.dir, "redis.log")))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// command sends one command to the server at addr, on a connection of its own, and returns its
// reply, which must be a simple string, an integer or a bulk string. An error reply is returned
// as an error. It gives up early when abort is closed (a nil abort is never closed).
func command(abort <-chan struct{}, addr string, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if abort != nil {
		finished := make(chan struct{})
		defer close(finished)
		go func() {
			select {
			case <-abort:
				conn.Close() // unblocks the write or read below
			case <-finished:
			}
		}()
	}
	conn.SetDeadline(time.Now().Add(ioTimeout))
	var req bytes.Buffer
	fmt.Fprintf(&req, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&req, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write(req.Bytes()); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("unexpected reply %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	default:
		return "", fmt.Errorf("unexpected reply %q", line)
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
