// Package mysqltest starts a real MariaDB server for integration tests.
//
// The first call to DSN starts one mariadbd per test process, in a fresh temp dir on a free
// loopback port, and every call gives its test a fresh, empty database that is dropped when the
// test ends. The package never skips: if the server cannot start, the test fails with the tail of
// the server's log. Call Stop from TestMain to shut the server down and remove its files:
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		mysqltest.Stop()
//		os.Exit(code)
//	}
package mysqltest

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"seckill/internal/servertest"
)

const (
	readyTimeout = 60 * time.Second // how long a starting server may take to accept connections
	stopTimeout  = 10 * time.Second // how long Stop waits after SIGTERM before SIGKILL
	adminTimeout = 30 * time.Second // how long CREATE and DROP DATABASE may take
)

var (
	startOnce sync.Once
	shared    *Instance
	startErr  error
	dbSeq     atomic.Int64
)

// DSN returns mysql://root@127.0.0.1:PORT/DBNAME, naming a fresh, empty database on the shared
// server, which it starts on first use. The database is dropped when t ends.
func DSN(t testing.TB) string {
	t.Helper()
	in := Server(t)
	name := dbName(t.Name())
	if err := in.admin("CREATE DATABASE " + name); err != nil {
		t.Fatalf("mysqltest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		// The whole server is thrown away by Stop, so a database left behind is only logged.
		if err := in.admin("DROP DATABASE IF EXISTS " + name); err != nil {
			t.Logf("mysqltest: drop database %s: %v", name, err)
		}
	})
	return fmt.Sprintf("mysql://root@127.0.0.1:%d/%s", in.port, name)
}

// DriverDSN converts seckill's mysql://user:pass@host:port/db form into the
// user:pass@tcp(host:port)/db form of github.com/go-sql-driver/mysql.
func DriverDSN(dsn string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("parse dsn: %w", err)
	}
	if u.Scheme != "mysql" || u.Host == "" {
		return "", fmt.Errorf("dsn %q: want mysql://user:pass@host:port/db", dsn)
	}
	cfg := mysql.NewConfig()
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Net, cfg.Addr = "tcp", u.Host
	cfg.DBName = strings.Trim(u.Path, "/")
	return cfg.FormatDSN(), nil
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
		t.Fatalf("mysqltest: cannot start MariaDB: %v\n"+
			"(`make test` installs the packages the tests need, mariadb-server among them)", startErr)
	case shared == nil:
		t.Fatalf("mysqltest: the server was stopped by Stop")
	}
	return shared
}

// Instance is the shared MariaDB server of the test process. Its methods are for fault tests,
// which must not run in parallel with other tests using the server.
type Instance struct {
	mariadbd string
	dir      string
	port     int

	mu   sync.Mutex
	proc *servertest.Process // the last server process started; nil before the first
}

// Port returns the TCP port the server listens on, on 127.0.0.1.
func (in *Instance) Port() int { return in.port }

// Kill kills the server with SIGKILL, as a crash would, and waits for it to exit.
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
		t.Fatalf("mysqltest: restart MariaDB: %v", err)
	}
}

// start creates a data dir in a fresh temp dir and starts a server on it.
func start() (_ *Instance, err error) {
	mariadbd, err := servertest.FindBinary("mariadbd", "/usr/sbin/mariadbd")
	if err != nil {
		return nil, err
	}
	installDB, err := servertest.FindBinary("mariadb-install-db", "/usr/bin/mariadb-install-db")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "mysqltest-")
	if err != nil {
		return nil, fmt.Errorf("create temp dir: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	if err := initDataDir(installDB, dir); err != nil {
		return nil, err
	}
	port, err := servertest.FreePort()
	if err != nil {
		return nil, err
	}
	in := &Instance{mariadbd: mariadbd, dir: dir, port: port}
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.launch(); err != nil {
		return nil, err
	}
	return in, nil
}

// initDataDir creates the system tables in dir/data, with a passwordless root.
func initDataDir(installDB, dir string) error {
	args := []string{
		"--no-defaults",
		"--datadir=" + filepath.Join(dir, "data"),
		"--auth-root-authentication-method=normal",
		"--skip-test-db",
	}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	cmd := exec.Command(installDB, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mariadb-install-db: %w\n%s", err, servertest.Tail(out))
	}
	return nil
}

// launch starts mariadbd on the instance's data dir and port and waits until it is ready.
// The caller holds in.mu.
func (in *Instance) launch() error {
	logPath := filepath.Join(in.dir, "err.log")
	cmd := exec.Command(in.mariadbd, in.serverArgs(logPath)...)
	cmd.Dir = in.dir
	p, err := servertest.Launch(cmd, logPath, func(p *servertest.Process) error {
		return waitReady(p, in.adminDSN())
	})
	if err != nil {
		return fmt.Errorf("mariadbd on port %d: %w", in.port, err)
	}
	in.proc = p
	return nil
}

// serverArgs returns mariadbd's command line: no config files, loopback only, kept light.
func (in *Instance) serverArgs(logPath string) []string {
	args := []string{
		"--no-defaults",
		"--datadir=" + filepath.Join(in.dir, "data"),
		"--socket=" + filepath.Join(in.dir, "sock"),
		"--port=" + strconv.Itoa(in.port),
		"--bind-address=127.0.0.1",
		"--log-error=" + logPath,
		"--pid-file=" + filepath.Join(in.dir, "pid"),
		"--skip-log-bin",
		"--innodb-buffer-pool-size=64M",
		"--skip-name-resolve",
		"--max-connections=500",
	}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root") // mariadbd refuses to run as root without it
	}
	return args
}

// adminDSN is the driver DSN of root on the server, with no database selected.
func (in *Instance) adminDSN() string {
	return fmt.Sprintf("root@tcp(127.0.0.1:%d)/", in.port)
}

// admin runs one statement as root, on a connection of its own.
func (in *Instance) admin(stmt string) error {
	db, err := sql.Open("mysql", in.adminDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	_, err = db.ExecContext(ctx, stmt)
	return err
}

// stop shuts the server down with SIGTERM, and SIGKILL if it has not exited after stopTimeout.
func (in *Instance) stop() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.proc.Stop(syscall.SIGTERM, stopTimeout)
}

// waitReady pings the server at dsn until it answers, p exits or readyTimeout passes.
func waitReady(p *servertest.Process, dsn string) error {
	db, err := sql.Open("mysql", dsn)
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
// lowercase letters, digits and underscores, at most 64 characters.
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
	return truncate(b.String(), 64)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
