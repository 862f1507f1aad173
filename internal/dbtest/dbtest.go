// Package dbtest starts the real database servers of the integration tests: MariaDB and
// PostgreSQL.
//
// The first call for a kind starts one server of it per test process, in a fresh temp dir on a
// free loopback port, and every call to MySQLDSN or PostgresDSN gives its test a fresh, empty
// database on it that is dropped when the test ends. A test that needs a server is skipped in the
// fast tier (go test -short: internal/testtier) and never otherwise: if the server cannot start,
// the test fails with the tail of the server's log. Call StopAll from TestMain to shut the
// servers down and remove their files:
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		dbtest.StopAll()
//		os.Exit(code)
//	}
//
// PostgreSQL refuses to run as root, so when the tests run as root its server runs as the
// postgres OS user.
//
// The servers are launched by internal/servers, which seckill bench uses too; this package adds
// what tests need on top: the shared server, a database per test, failing the test. A test that
// opens a MySQL database itself reads the DSN with sqlstore.MySQLDriverDSN.
package dbtest

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver, for the DSNs

	"seckill/internal/servers"
	"seckill/internal/testtier"
)

// The test process's servers, one of each kind, started on first use.
var (
	mariaDB  = newShared("MariaDB", "mariadb-server", servers.StartMariaDB)
	postgres = newShared("PostgreSQL", "postgresql", servers.StartPostgres)
)

// MySQLDSN returns mysql://root@127.0.0.1:PORT/DBNAME, naming a fresh, empty database on the
// shared MariaDB server, which it starts on first use. The database is dropped when t ends.
func MySQLDSN(t testing.TB) string {
	t.Helper()
	return mariaDB.dsn(t)
}

// MariaDB returns the shared MariaDB server, starting it on first use. It fails t if the server
// cannot be started.
func MariaDB(t testing.TB) *Instance[*servers.MariaDB] {
	t.Helper()
	return mariaDB.server(t)
}

// PostgresDSN returns postgres://postgres@127.0.0.1:PORT/DBNAME?sslmode=disable, naming a fresh,
// empty database on the shared PostgreSQL server, which it starts on first use. The database is
// dropped when t ends.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	return postgres.dsn(t)
}

// Postgres returns the shared PostgreSQL server, starting it on first use. It fails t if the
// server cannot be started.
func Postgres(t testing.TB) *Instance[*servers.Postgres] {
	t.Helper()
	return postgres.server(t)
}

// StopAll stops the shared servers that were started and removes their files. Call it from
// TestMain after m.Run; no server can be started after it.
func StopAll() {
	mariaDB.stop()
	postgres.stop()
}

// Server is a database server of internal/servers (MariaDB, PostgreSQL).
type Server interface {
	Port() int
	Kill()
	Restart() error
	Close()
	CreateDatabase(name string) (dsn string, err error)
	DropDatabase(name string) error
}

// shared is a test process's one server of a kind, started on first use.
type shared[S Server] struct {
	what, install string // "MariaDB", the Debian package to install
	start         func() (S, error)

	once    sync.Once
	in      *Instance[S] // nil before a start and after stop
	err     error
	stopped bool
	seq     atomic.Int64
}

// newShared returns the shared server that start starts: what names the server, install the
// Debian package that provides it.
func newShared[S Server](what, install string, start func() (S, error)) *shared[S] {
	return &shared[S]{what: what, install: install, start: start}
}

// server returns the shared server, starting it on first use. It fails t if the server cannot
// be started.
func (s *shared[S]) server(t testing.TB) *Instance[S] {
	t.Helper()
	testtier.NeedsServer(t, s.what)
	s.once.Do(func() {
		srv, err := s.start()
		if err != nil {
			s.err = err
			return
		}
		s.in = &Instance[S]{srv: srv, what: s.what}
	})
	switch {
	case s.err != nil:
		t.Fatalf("dbtest: cannot start %s: %v\n(`make test` installs the packages the tests need, %s among them)",
			s.what, s.err, s.install)
	case s.in == nil:
		t.Fatalf("dbtest: the %s server was stopped by StopAll", s.what)
	}
	return s.in
}

// dsn names a fresh, empty database on the shared server, which it starts on first use. The
// database is dropped when t ends.
func (s *shared[S]) dsn(t testing.TB) string {
	t.Helper()
	in := s.server(t)
	name := s.dbName(t.Name())
	dsn, err := in.srv.CreateDatabase(name)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	t.Cleanup(func() {
		// The whole server is thrown away by StopAll, so a database left behind is only logged.
		if err := in.srv.DropDatabase(name); err != nil {
			t.Logf("dbtest: %v", err)
		}
	})
	return dsn
}

// stop stops the shared server, if one was started, and removes its files; no server can be
// started after it.
func (s *shared[S]) stop() {
	s.once.Do(func() {}) // waits for a start in progress and keeps any later one from happening
	if s.in != nil {
		s.in.srv.Close()
		s.in = nil
	}
}

// dbName turns a test name into a unique database name: t<seq>_<test name>, with only lowercase
// letters, digits and underscores, at most 63 characters (PostgreSQL's limit; MariaDB's is 64).
func (s *shared[S]) dbName(testName string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "t%d_", s.seq.Add(1))
	for _, r := range strings.ToLower(testName) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	name := b.String()
	return name[:min(len(name), 63)]
}

// Instance is a shared server of the test process. Its methods are for fault tests, which must
// not run in parallel with other tests using the server.
type Instance[S Server] struct {
	srv  S
	what string
}

// Port returns the TCP port the server listens on, on 127.0.0.1.
func (in *Instance[S]) Port() int { return in.srv.Port() }

// Kill kills the server (and its children) with SIGKILL, as a crash would, and waits for them to
// exit.
func (in *Instance[S]) Kill() { in.srv.Kill() }

// Restart starts the server again on the same data dir and port, killing it first if it is still
// running, and waits until it accepts connections. It fails t if the server does not come up.
func (in *Instance[S]) Restart(t testing.TB) {
	t.Helper()
	if err := in.srv.Restart(); err != nil {
		t.Fatalf("dbtest: restart %s: %v", in.what, err)
	}
}
