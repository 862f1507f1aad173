// Package faults_test runs seckill's fault suites: a Redis Cluster failing over, a slot moving,
// Sentinel promoting a replica, a replica lagging, bad networks, a hung Redis, a crowd through each
// of them, against nodes of the built binary (internal/e2etest). They are a package of their own
// so that they run beside cmd/seckill's suite, not after it. The nodes run without the race
// detector (the built binary); the race-enabled suites cover the same code in process.
package faults_test

import (
	"maps"
	"os"
	"testing"

	_ "modernc.org/sqlite" // the suites read the nodes' SQLite databases

	"seckill/internal/dbtest"
	"seckill/internal/e2etest"
)

type (
	client  = e2etest.Client
	outcome = e2etest.Outcome
)

func newClient(t testing.TB, base string) *client          { return e2etest.NewClient(t, base) }
func testEnv(dsn string, more ...string) map[string]string { return e2etest.Env(dsn, more...) }
func sqliteDSN(t *testing.T) string                        { return e2etest.SQLiteDSN(t) }

// startNode starts a node of the built binary on env, in role ("" for all), and returns its
// base URL; it is killed when t ends.
func startNode(t *testing.T, env map[string]string, role string) string {
	t.Helper()
	env = maps.Clone(env)
	if role != "" {
		env["SECKILL_ROLE"] = role
	}
	return e2etest.StartChild(t, env).Base
}

func TestMain(m *testing.M) {
	code := m.Run()
	dbtest.StopAll()
	os.Exit(code)
}
