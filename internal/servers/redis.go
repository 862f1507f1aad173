package servers

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	redisReadyTimeout  = 20 * time.Second // how long a starting server may take to answer PING
	redisStopTimeout   = 5 * time.Second  // how long Stop waits after SIGTERM before SIGKILL
	redisIOTimeout     = 2 * time.Second  // dial, write and read timeout of one RedisCommand
	redisStartAttempts = 3                // tries with fresh ports when a port was taken meanwhile
)

// RedisOptions are the persistence options of a server started by StartRedis.
type RedisOptions struct {
	AOF   bool   // --appendonly yes: writes are logged and reloaded by Restart
	Fsync string // with AOF, "always" or "everysec" (the default when empty); "no" is accepted too
}

// Args returns the persistence part of redis-server's command line for o, for StartRedisArgs,
// or why o is not valid.
func (o RedisOptions) Args() ([]string, error) {
	if !o.AOF {
		if o.Fsync != "" {
			return nil, fmt.Errorf("Fsync is %q but AOF is off", o.Fsync)
		}
		return []string{"--appendonly", "no"}, nil
	}
	fsync := o.Fsync
	switch fsync {
	case "":
		fsync = "everysec"
	case "always", "everysec", "no":
	default:
		return nil, fmt.Errorf("Fsync is %q, want \"always\" or \"everysec\"", o.Fsync)
	}
	return []string{"--appendonly", "yes", "--appendfsync", fsync}, nil
}

// Redis is one redis-server started by StartRedis or StartRedisArgs. Its methods may be called
// from several goroutines.
type Redis struct {
	bin  string   // path of redis-server
	dir  string   // working dir: log, AOF, nodes.conf
	port int      // TCP port on 127.0.0.1
	args []string // command line after the binary

	mu   sync.Mutex
	proc *Process // the last process started
}

// StartRedis starts redis-server with opts in dir (which must exist) on a free 127.0.0.1 port,
// retrying with another port if the one picked was taken meanwhile, and waits until it answers
// PING. dir is the server's own: it holds its log and its AOF, and is emptied before a retry.
// The caller must Stop or Kill the server.
func StartRedis(dir string, opts RedisOptions) (*Redis, error) {
	persistence, err := opts.Args()
	if err != nil {
		return nil, err
	}
	return StartRedisArgs(dir, persistence, FreePort, nil)
}

// StartRedisArgs is StartRedis with extra, a raw command line appended to the one that sets the
// port, dir and log (RedisOptions.Args, or cluster mode for a cluster node), and pick, which
// returns the port to try. logf, which may be nil, is told about retries.
func StartRedisArgs(dir string, extra []string, pick func() (int, error), logf func(format string, args ...any)) (*Redis, error) {
	return startRedis(dir, nil, "", extra, pick, logf)
}

// configFile is the file in a server's dir it is started from. A server runs from a file of its
// own, as in production, so that what Redis Sentinel makes of it (REPLICAOF then CONFIG REWRITE
// on a failover) is what it comes back as after a restart: a replica promoted and killed returns
// a master's replica, not the replica of whatever its first command line named.
const configFile = "redis.conf"

// startRedis is StartRedisArgs with first, the arguments that must come before every other (a
// config file: a sentinel's), or else conf, what the server's own config file starts with.
func startRedis(dir string, first []string, conf string, extra []string, pick func() (int, error), logf func(format string, args ...any)) (*Redis, error) {
	bin, err := FindBinary("redis-server", "/usr/bin/redis-server")
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "redis.log")
	for attempt := 1; ; attempt++ {
		port, err := pick()
		if err != nil {
			return nil, err
		}
		s := &Redis{bin: bin, dir: dir, port: port}
		lead := first
		if lead == nil { // written afresh at each attempt: a retry empties dir
			file := filepath.Join(dir, configFile)
			if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
				return nil, err
			}
			// A master syncs a replica at once, not after Redis's 5 s wait for more replicas
			// to share the transfer: a replica that never synced can neither take over nor
			// acknowledge a write. Every server, as any may be promoted (a sentinel is not one).
			lead = []string{file, "--repl-diskless-sync-delay", "0"}
		}
		s.args = append(append(slices.Clip(lead),
			"--port", strconv.Itoa(port),
			"--bind", "127.0.0.1",
			"--dir", dir,
			"--logfile", logPath,
			"--daemonize", "no",
			"--save", ""),
			extra...)
		s.mu.Lock()
		err = s.launch()
		s.mu.Unlock()
		if err == nil {
			return s, nil
		}
		if attempt < redisStartAttempts && strings.Contains(err.Error(), "Address already in use") {
			if logf != nil {
				logf("port %d was taken, trying another: %v", port, err)
			}
			// Start afresh: a cluster node has already written nodes.conf when it finds its bus
			// port taken.
			if err := emptyDir(dir); err != nil {
				return nil, err
			}
			continue
		}
		return nil, err
	}
}

// StartRedisReplica starts a redis-server in dir that replicates the server at master
// ("127.0.0.1:PORT"), with extra (the ACL users and --masteruser/--masterauth a master with
// users needs; persistence), and waits until it is in sync with the master.
func StartRedisReplica(dir, master string, extra []string, logf func(format string, args ...any)) (*Redis, error) {
	host, port, ok := strings.Cut(master, ":")
	if !ok {
		return nil, fmt.Errorf("replica of %q: not host:port", master)
	}
	// The master is named in the config file, not on the command line, which would override the
	// file's replicaof at every restart (see configFile).
	r, err := startRedis(dir, nil, "replicaof "+host+" "+port+"\n", extra, FreePort, logf)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(redisReadyTimeout)
	for {
		info, err := RedisCommand(r.Addr(), "INFO", "replication")
		if err == nil && replicaInSync(info) && replicaOnline(master, r.Port()) {
			return r, nil
		}
		if time.Now().After(deadline) {
			r.Stop()
			return nil, fmt.Errorf("the replica %s of %s is not in sync after %v: %v %q", r.Addr(), master, redisReadyTimeout, err, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// replicaOnline reports whether the master at addr counts its replica on port as online: the
// replica's link comes up before its first acknowledgement, and until that WAIT does not count it.
func replicaOnline(master string, port int) bool {
	info, err := RedisCommand(master, "INFO", "replication")
	return err == nil && slices.Contains(onlinePorts(info), port)
}

// onlinePorts returns the ports of the replicas a master's INFO replication counts online.
func onlinePorts(info string) []int {
	var ports []int
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "slave") || !strings.Contains(line, ",state=online,") {
			continue
		}
		for _, field := range strings.Split(line, ",") {
			if p, ok := strings.CutPrefix(field, "port="); ok {
				if port, err := strconv.Atoi(p); err == nil {
					ports = append(ports, port)
				}
			}
		}
	}
	return ports
}

// replicaInSync reports whether a replica's INFO replication says it is in sync with its master:
// its link up and no sync in progress. Its master counts it online from the end of the transfer
// of its data, while it may still be loading them, and it acknowledges nothing until it has (WAIT
// does not count it): a failover then can promote a replica that lacks what the master
// acknowledged, and a write waiting for it times out.
func replicaInSync(info string) bool {
	return strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up") &&
		!strings.Contains(info, "master_sync_in_progress:1")
}

// emptyDir removes everything in dir but not dir itself, whose mode and owner were the caller's
// choice.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// Addr returns the server's address, "127.0.0.1:PORT".
func (s *Redis) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL returns the server's URL, "redis://127.0.0.1:PORT/0".
func (s *Redis) URL() string { return "redis://" + s.Addr() + "/0" }

// Port returns the TCP port the server listens on, on 127.0.0.1.
func (s *Redis) Port() int { return s.port }

// LogPath returns the path of the server's log, in its dir, for error messages.
func (s *Redis) LogPath() string { return filepath.Join(s.dir, "redis.log") }

// Kill kills the server with SIGKILL, as a crash would, and waits for it to exit. It does
// nothing if the server is not running.
func (s *Redis) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc.Kill()
}

// Restart starts the server again with the same dir, port and command line, killing it first if
// it is still running, and waits until it answers PING: with AOF, the data written before is
// reloaded by then. A cluster node rejoins its cluster, but only after a while.
func (s *Redis) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc.Kill()
	return s.launch()
}

// Stop shuts the server down with SIGTERM, and SIGKILL if it has not exited after 5 s. It does
// nothing if the server is not running. The server may be restarted after it.
func (s *Redis) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc.Stop(syscall.SIGTERM, redisStopTimeout)
}

// Pause freezes the server (SIGSTOP): connections stay open and nothing answers, as when a
// server hangs. Resume thaws it.
func (s *Redis) Pause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc.Signal(syscall.SIGSTOP)
}

// Resume thaws a paused server (SIGCONT).
func (s *Redis) Resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc.Signal(syscall.SIGCONT)
}

// Running reports whether the server's process is running.
func (s *Redis) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && !s.proc.Exited()
}

// launch starts redis-server and waits until it answers PING. The caller holds s.mu.
func (s *Redis) launch() error {
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.dir
	// redis-server writes to --logfile itself; its stdout and stderr, where it reports a bad
	// command line before it opens the log, go to the same file.
	p, err := Launch(cmd, s.LogPath(), func(p *Process) error {
		return waitRedisReady(p, s.Addr())
	})
	if err != nil {
		return fmt.Errorf("redis-server on port %d: %w", s.port, err)
	}
	s.proc = p
	return nil
}

// waitRedisReady sends PING to addr until it answers PONG, p exits or redisReadyTimeout passes.
// A server loading its AOF answers LOADING until it is done.
func waitRedisReady(p *Process, addr string) error {
	return p.WaitReady(redisReadyTimeout, 50*time.Millisecond, func() error {
		// If the port was taken by another program, which might accept the connection and never
		// answer, the server's exit aborts the PING.
		reply, err := redisCommand(p.Done(), addr, "PING")
		if err == nil && reply != "PONG" {
			err = fmt.Errorf("PING answered %q", reply)
		}
		return err
	})
}

// Freeze blocks the server for d with DEBUG SLEEP (it needs the DEBUG command, ClusterOptions's
// Debug): a replica frozen this way takes no writes from its master, deterministically. Freeze
// returns when the server answers again.
func (s *Redis) Freeze(d time.Duration) error {
	_, err := redisCommandWithin(nil, s.Addr(), d+redisIOTimeout, "DEBUG", "SLEEP", strconv.FormatFloat(d.Seconds(), 'f', 3, 64))
	return err
}

// RedisCommand sends one command to the Redis server at addr, on a connection of its own with a
// timeout of 2 s, and returns its reply, which must be a simple string, an integer, a bulk string
// or a flat array of them (its elements one a line). An error reply is returned as an error. It is for probing a server (PING, CLUSTER
// INFO) without a client library.
func RedisCommand(addr string, args ...string) (string, error) {
	return redisCommand(nil, addr, args...)
}

// redisCommand is RedisCommand that gives up early when abort is closed (a nil abort is never
// closed).
func redisCommand(abort <-chan struct{}, addr string, args ...string) (string, error) {
	return redisCommandWithin(abort, addr, redisIOTimeout, args...)
}

// redisCommandWithin is redisCommand with a timeout of its own for the reply.
func redisCommandWithin(abort <-chan struct{}, addr string, timeout time.Duration, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, redisIOTimeout)
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
	conn.SetDeadline(time.Now().Add(timeout))
	var req bytes.Buffer
	fmt.Fprintf(&req, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&req, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write(req.Bytes()); err != nil {
		return "", err
	}
	return readReply(bufio.NewReader(conn), 0)
}

// readReply reads one RESP reply: a simple string, an integer, a bulk string, or an array of
// them, whose elements are returned one a line (a nil element as an empty line).
func readReply(r *bufio.Reader, depth int) (string, error) {
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
		if n == -1 {
			return "", nil
		}
		if err != nil || n < 0 {
			return "", fmt.Errorf("unexpected reply %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil || depth > 0 {
			return "", fmt.Errorf("unexpected reply %q", line)
		}
		elems := make([]string, 0, max(n, 0))
		for range n {
			e, err := readReply(r, depth+1)
			if err != nil {
				return "", err
			}
			elems = append(elems, e)
		}
		return strings.Join(elems, "\n"), nil
	default:
		return "", fmt.Errorf("unexpected reply %q", line)
	}
}
