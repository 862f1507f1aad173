// Package pgtest starts a real PostgreSQL server for integration tests.
//
// The first call to DSN starts one postgres per test process, in a fresh temp dir on a free
// loopback port, and every call gives its test a fresh, empty database that is dropped when the
// test ends. The package never skips: if the server cannot start, the test fails with the tail of
// the server's log. Call Stop from TestMain to shut the server down and remove its files:
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		pgtest.Stop()
//		os.Exit(code)
//	}
//
// PostgreSQL refuses to run as root, so when the tests run as root the server runs as the
// postgres OS user.
package pgtest

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
)

const (
	readyTimeout = 60 * time.Second // how long a starting server may take to accept connections
	stopTimeout  = 10 * time.Second // how long Stop waits for a fast shutdown before SIGKILL
	adminTimeout = 30 * time.Second // how long CREATE and DROP DATABASE may take
)

var (
	startOnce sync.Once
	shared    *Instance
	startErr  error
	dbSeq     atomic.Int64
)

// DSN returns postgres://postgres@127.0.0.1:PORT/DBNAME?sslmode=disable, naming a fresh, empty
// database on the shared server, which it starts on first use. The database is dropped when t
// ends.
func DSN(t testing.TB) string {
	t.Helper()
	in := Server(t)
	name := dbName(t.Name())
	if err := in.admin("CREATE DATABASE " + name); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		// The whole server is thrown away by Stop, so a database left behind is only logged.
		if err := in.admin("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			t.Logf("pgtest: drop database %s: %v", name, err)
		}
	})
	return in.dsn(name)
}

// Stop stops the shared server, if one was started, and removes its temp dir. Call it from
// TestMain after m.Run; no server can be started after it.
func Stop() {
	startOnce.Do(func() {}) // waits for a start in progress and keeps any later one from happening
	if shared == nil {
		return
	}
	shared.stop()
	os.RemoveAll(shared.dir)
}

// Server returns the shared server, starting it on first use. It fails t if the server cannot
// be started.
func Server(t testing.TB) *Instance {
	t.Helper()
	startOnce.Do(func() { shared, startErr = start() })
	switch {
	case startErr != nil:
		t.Fatalf("pgtest: cannot start PostgreSQL: %v\n"+
			"(`make test` installs the packages the tests need, postgresql among them)", startErr)
	case shared == nil:
		t.Fatalf("pgtest: the server was stopped by Stop")
	}
	return shared
}

// Instance is the shared PostgreSQL server of the test process. Its methods are for fault
// tests, which must not run in parallel with other tests using the server.
type Instance struct {
	postgres string
	cred     *syscall.Credential // whom to run as; nil for the current user
	dir      string
	port     int

	mu   sync.Mutex
	proc *process // the last server process started; nil before the first
}

// process is a running (or exited) server process.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
}

// Port returns the TCP port the server listens on, on 127.0.0.1.
func (in *Instance) Port() int { return in.port }

// Kill kills the server and its backends with SIGKILL, as a crash would, and waits for it to
// exit.
func (in *Instance) Kill() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.proc.kill()
}

// Restart starts the server again on the same data dir and port, killing it first if it is
// still running, and waits until it accepts connections. It fails t if the server does not
// come up.
func (in *Instance) Restart(t testing.TB) {
	t.Helper()
	in.mu.Lock()
	defer in.mu.Unlock()
	in.proc.kill()
	if err := in.launch(); err != nil {
		t.Fatalf("pgtest: restart PostgreSQL: %v", err)
	}
}

// start creates a cluster in a fresh temp dir and starts a server on it.
func start() (_ *Instance, err error) {
	initdb, err := findInitdb()
	if err != nil {
		return nil, err
	}
	cred, err := serverUser()
	if err != nil {
		return nil, err
	}
	dir, err := makeDir(cred)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	if err := initCluster(initdb, cred, dir); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	in := &Instance{
		postgres: filepath.Join(filepath.Dir(initdb), "postgres"),
		cred:     cred,
		dir:      dir,
		port:     port,
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.launch(); err != nil {
		return nil, err
	}
	return in, nil
}

// findInitdb returns the initdb of the newest /usr/lib/postgresql/VERSION, else initdb in PATH.
func findInitdb() (string, error) {
	paths, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(paths) == 0 {
		path, err := exec.LookPath("initdb")
		if err != nil {
			return "", errors.New("initdb is not installed (not in /usr/lib/postgresql/*/bin nor in PATH)")
		}
		return path, nil
	}
	sort.Slice(paths, func(i, j int) bool { return version(paths[i]) < version(paths[j]) })
	return paths[len(paths)-1], nil
}

// version returns the VERSION of /usr/lib/postgresql/VERSION/bin/initdb as a number (9.6, 15).
func version(initdb string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(filepath.Dir(initdb))), 64)
	return v
}

// serverUser returns the credential of the postgres OS user if the tests run as root (the
// server refuses to run as root), else nil.
func serverUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, so the server must run as user postgres: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("uid of postgres: %w", err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("gid of postgres: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// makeDir creates the temp dir, owned by cred's user if cred is not nil.
func makeDir(cred *syscall.Credential) (string, error) {
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return "", fmt.Errorf("create temp dir: %w", err)
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("chown temp dir: %w", err)
		}
	}
	return dir, nil
}

// initCluster creates a cluster in dir/data whose superuser postgres needs no password.
func initCluster(initdb string, cred *syscall.Credential, dir string) error {
	cmd := exec.Command(initdb,
		"-D", filepath.Join(dir, "data"),
		"-U", "postgres",
		"-A", "trust",
		"-E", "UTF8",
		"--no-locale", // C collation, whatever locales this machine has
		"--no-sync",   // the cluster is thrown away
	)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, tail(out))
	}
	return nil
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// launch starts postgres on the instance's data dir and port and waits until it is ready.
// The caller holds in.mu.
func (in *Instance) launch() error {
	logPath := filepath.Join(in.dir, "postgres.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open server log: %w", err)
	}
	defer logFile.Close() // the child has its own copy
	cmd := exec.Command(in.postgres,
		"-D", filepath.Join(in.dir, "data"),
		"-p", strconv.Itoa(in.port),
		"-k", in.dir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=200",
		"-c", "shared_buffers=32MB",
	)
	cmd.Dir = in.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: in.cred,
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	in.proc = watch(cmd)
	if err := waitReady(in.dsn("postgres"), in.proc.done); err != nil {
		in.proc.kill()
		return fmt.Errorf("postgres on port %d: %w\nserver log ends with:\n%s", in.port, err, tailFile(logPath))
	}
	return nil
}

// dsn returns the DSN of database name on the server, as superuser postgres.
func (in *Instance) dsn(name string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", in.port, name)
}

// admin runs one statement as superuser in database postgres, on a connection of its own.
func (in *Instance) admin(stmt string) error {
	db, err := sql.Open("pgx", in.dsn("postgres"))
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	_, err = db.ExecContext(ctx, stmt)
	return err
}

// stop shuts the server down, and SIGKILLs it if it has not exited after stopTimeout. It sends
// SIGINT, PostgreSQL's fast shutdown: SIGTERM would be a smart shutdown, which waits for every
// client to disconnect.
func (in *Instance) stop() {
	in.mu.Lock()
	defer in.mu.Unlock()
	p := in.proc
	if p == nil || p.exited() {
		return
	}
	p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		p.kill()
	}
}

// watch reaps cmd in the background; done is closed when it has exited.
func watch(cmd *exec.Cmd) *process {
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(p.done)
	}()
	return p
}

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill SIGKILLs the process's group, the postmaster and its backends, and waits for the
// postmaster to exit. It does nothing if p is nil or has already exited (its pid may belong to
// someone else by now).
func (p *process) kill() {
	if p == nil || p.exited() {
		return
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) // Setpgid: the group id is the pid
	<-p.done
}

// waitReady pings the server until it answers, it exits (done is closed) or readyTimeout passes.
func waitReady(dsn string, done <-chan struct{}) error {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(readyTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %w", readyTimeout, err)
		}
		select {
		case <-done:
			return errors.New("server exited during startup")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// dbName turns a test name into a unique database name: t<seq>_<test name>, with only
// lowercase letters, digits and underscores, at most 63 characters.
func dbName(testName string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "t%d_", dbSeq.Add(1))
	for _, r := range strings.ToLower(testName) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return truncate(b.String(), 63)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// tailFile returns the last lines of the file at path, or why it cannot be read.
func tailFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	return tail(b)
}

// tail returns about the last 3 KB of b, starting at a line.
func tail(b []byte) string {
	const keep = 3 << 10
	if len(b) > keep {
		b = b[len(b)-keep:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return strings.TrimRight(string(b), "\n")
}
