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
	"testing"

	"github.com/go-sql-driver/mysql"

	"seckill/internal/dbtest"
	"seckill/internal/servers"
)

var shared = dbtest.New("mysqltest", "MariaDB", "mariadb-server", servers.StartMariaDB)

// DSN returns mysql://root@127.0.0.1:PORT/DBNAME, naming a fresh, empty database on the shared
// server, which it starts on first use. The database is dropped when t ends.
func DSN(t testing.TB) string {
	t.Helper()
	return shared.DSN(t)
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
func Stop() { shared.Stop() }

// Instance is the shared MariaDB server of the test process (see dbtest.Instance).
type Instance = dbtest.Instance[*servers.MariaDB]

// Server returns the shared server, starting it on first use. It fails t if the server cannot
// be started.
func Server(t testing.TB) *Instance {
	t.Helper()
	return shared.Server(t)
}
