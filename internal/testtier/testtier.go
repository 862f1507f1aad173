// Package testtier is the one place that tells the two tiers of tests apart. `make check` runs
// `go test -short ./...`: the domain against its in-process adapters and the handlers against
// the domain, hermetic (no server, no browser, no built binary) and fast. `make test` runs
// everything. Every helper that starts a server (Redis, MariaDB, PostgreSQL, Chromium, a
// seckill node of the built binary or in this process) calls NeedsServer first, so a test that
// needs one is skipped in the fast tier and run, never skipped, in the full one: there a
// missing server fails the test.
package testtier

import "testing"

// NeedsServer skips t in the fast tier (go test -short): it needs what, a server the helper
// calling it is about to start.
func NeedsServer(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs %s: the fast tier (-short, make check) runs without servers; make test runs it", what)
	}
}
