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
	"testing"

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
