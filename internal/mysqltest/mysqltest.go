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
//
// The server is launched by internal/servers, which seckill bench uses too; this package adds
// what tests need on top: the shared server, a database per test, failing the test.
package mysqltest

import (
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"

	"seckill/internal/servers"
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
	dsn, err := in.m.CreateDatabase(name)
	if err != nil {
		t.Fatalf("mysqltest: %v", err)
	}
	t.Cleanup(func() {
		// The whole server is thrown away by Stop, so a database left behind is only logged.
		if err := in.m.DropDatabase(name); err != nil {
			t.Logf("mysqltest: %v", err)
		}
	})
	return dsn
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
	shared.m.Close()
}

// Server returns the shared server, starting it on first use. It fails t if the server cannot
// be started.
func Server(t testing.TB) *Instance {
	t.Helper()
	startOnce.Do(func() {
		m, err := servers.StartMariaDB()
		if err != nil {
			startErr = err
			return
		}
		shared = &Instance{m: m}
	})
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
	m *servers.MariaDB
}

// Port returns the TCP port the server listens on, on 127.0.0.1.
func (in *Instance) Port() int { return in.m.Port() }

// Kill kills the server with SIGKILL, as a crash would, and waits for it to exit.
func (in *Instance) Kill() { in.m.Kill() }

// Restart starts the server again on the same data dir and port, killing it first if it is
// still running, and waits until it accepts connections. It fails t if the server does not
// come up.
func (in *Instance) Restart(t testing.TB) {
	t.Helper()
	if err := in.m.Restart(); err != nil {
		t.Fatalf("mysqltest: restart MariaDB: %v", err)
	}
}

// dbName turns a test name into a unique database name: t<seq>_<test name>, with only
// lowercase letters, digits and underscores, at most 63 characters (what servers accepts, as
// PostgreSQL would; MariaDB would take 64).
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
