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
	"context"
	"database/sql"
	"errors"
	"fmt"
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

	"seckill/internal/servertest"
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
	proc *servertest.Process // the last server process started; nil before the first
}

// Port returns the TCP port the server listens on, on 127.0.0.1.
func (in *Instance) Port() int { return in.port }

// Kill kills the server and its backends with SIGKILL, as a crash would, and waits for it to
// exit.
func (in *Instance) Kill() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.proc.Kill()
}

// Restart starts the server again on the same data dir and port, killing it first if it is
// still running, and waits until it accepts connections. It fails t if the server does not
// come up.
func (in *Instance) Restart(t testing.TB) {
	t.Helper()
	in.mu.Lock()
	defer in.mu.Unlock()
	in.proc.Kill()
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
	port, err := servertest.FreePort()
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
		return fmt.Errorf("initdb: %w\n%s", err, servertest.Tail(out))
	}
	return nil
}

// launch starts postgres on the instance's data dir and port and waits until it is ready.
// The caller holds in.mu.
func (in *Instance) launch() error {
	cmd := exec.Command(in.postgres,
		"-D", filepath.Join(in.dir, "data"),
		"-p", strconv.Itoa(in.port),
		"-k", in.dir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=200",
		"-c", "shared_buffers=32MB",
	)
	cmd.Dir = in.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: in.cred} // Launch adds Setpgid and Pdeathsig
	p, err := servertest.Launch(cmd, filepath.Join(in.dir, "postgres.log"), func(p *servertest.Process) error {
		return waitReady(p, in.dsn("postgres"))
	})
	if err != nil {
		return fmt.Errorf("postgres on port %d: %w", in.port, err)
	}
	in.proc = p
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
	in.proc.Stop(syscall.SIGINT, stopTimeout)
}

// waitReady pings the server at dsn until it answers, p exits or readyTimeout passes.
func waitReady(p *servertest.Process, dsn string) error {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	return p.WaitReady(readyTimeout, 100*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return db.PingContext(ctx)
	})
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
