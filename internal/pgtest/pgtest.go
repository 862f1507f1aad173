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
//
// The server is launched by internal/servers, which seckill bench uses too; this package adds
// what tests need on top: the shared server, a database per test, failing the test.
package pgtest

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver, for the DSNs

	"seckill/internal/servers"
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
	dsn, err := in.pg.CreateDatabase(name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		// The whole server is thrown away by Stop, so a database left behind is only logged.
		if err := in.pg.DropDatabase(name); err != nil {
			t.Logf("pgtest: %v", err)
		}
	})
	return dsn
}

// Stop stops the shared server, if one was started, and removes its temp dir. Call it from
// TestMain after m.Run; no server can be started after it.
func Stop() {
	startOnce.Do(func() {}) // waits for a start in progress and keeps any later one from happening
	if shared == nil {
		return
	}
	shared.pg.Close()
}

// Server returns the shared server, starting it on first use. It fails t if the server cannot
// be started.
func Server(t testing.TB) *Instance {
	t.Helper()
	startOnce.Do(func() {
		pg, err := servers.StartPostgres()
		if err != nil {
			startErr = err
			return
		}
		shared = &Instance{pg: pg}
	})
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
	pg *servers.Postgres
}

// Port returns the TCP port the server listens on, on 127.0.0.1.
func (in *Instance) Port() int { return in.pg.Port() }

// Kill kills the server and its backends with SIGKILL, as a crash would, and waits for it to
// exit.
func (in *Instance) Kill() { in.pg.Kill() }

// Restart starts the server again on the same data dir and port, killing it first if it is
// still running, and waits until it accepts connections. It fails t if the server does not
// come up.
func (in *Instance) Restart(t testing.TB) {
	t.Helper()
	if err := in.pg.Restart(); err != nil {
		t.Fatalf("pgtest: restart PostgreSQL: %v", err)
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
