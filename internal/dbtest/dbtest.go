// Package dbtest is what mysqltest and pgtest share: one database server per test process,
// started on first use through internal/servers, a fresh database for every test that asks, and
// failing the test (never skipping it) when the server cannot start.
package dbtest

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"seckill/internal/testtier"
)

// Server is a database server of internal/servers (MariaDB, PostgreSQL).
type Server interface {
	Port() int
	Kill()
	Restart() error
	Close()
	CreateDatabase(name string) (dsn string, err error)
	DropDatabase(name string) error
}

// Shared is a test process's one server of a kind, started on first use.
type Shared[S Server] struct {
	pkg, what, install string // "mysqltest", "MariaDB", the Debian package to install
	start              func() (S, error)

	once    sync.Once
	in      *Instance[S] // nil before a start and after Stop
	err     error
	stopped bool
	seq     atomic.Int64
}

// New returns the shared server that start starts: pkg names the calling package in messages,
// what the server, install the Debian package that provides it.
func New[S Server](pkg, what, install string, start func() (S, error)) *Shared[S] {
	return &Shared[S]{pkg: pkg, what: what, install: install, start: start}
}

// Server returns the shared server, starting it on first use. It fails t if the server cannot
// be started.
func (s *Shared[S]) Server(t testing.TB) *Instance[S] {
	t.Helper()
	testtier.NeedsServer(t, s.what)
	s.once.Do(func() {
		srv, err := s.start()
		if err != nil {
			s.err = err
			return
		}
		s.in = &Instance[S]{srv: srv, pkg: s.pkg, what: s.what}
	})
	switch {
	case s.err != nil:
		t.Fatalf("%s: cannot start %s: %v\n(`make test` installs the packages the tests need, %s among them)",
			s.pkg, s.what, s.err, s.install)
	case s.in == nil:
		t.Fatalf("%s: the server was stopped by Stop", s.pkg)
	}
	return s.in
}

// DSN names a fresh, empty database on the shared server, which it starts on first use. The
// database is dropped when t ends.
func (s *Shared[S]) DSN(t testing.TB) string {
	t.Helper()
	in := s.Server(t)
	name := s.dbName(t.Name())
	dsn, err := in.srv.CreateDatabase(name)
	if err != nil {
		t.Fatalf("%s: %v", s.pkg, err)
	}
	t.Cleanup(func() {
		// The whole server is thrown away by Stop, so a database left behind is only logged.
		if err := in.srv.DropDatabase(name); err != nil {
			t.Logf("%s: %v", s.pkg, err)
		}
	})
	return dsn
}

// Stop stops the shared server, if one was started, and removes its files. Call it from TestMain
// after m.Run; no server can be started after it.
func (s *Shared[S]) Stop() {
	s.once.Do(func() {}) // waits for a start in progress and keeps any later one from happening
	if s.in != nil {
		s.in.srv.Close()
		s.in = nil
	}
}

// dbName turns a test name into a unique database name: t<seq>_<test name>, with only lowercase
// letters, digits and underscores, at most 63 characters (PostgreSQL's limit; MariaDB's is 64).
func (s *Shared[S]) dbName(testName string) string {
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

// Instance is the shared server of the test process. Its methods are for fault tests, which
// must not run in parallel with other tests using the server.
type Instance[S Server] struct {
	srv       S
	pkg, what string
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
		t.Fatalf("%s: restart %s: %v", in.pkg, in.what, err)
	}
}
