package servers_test

import (
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	"seckill/internal/servers"

	"seckill/internal/testtier"
)

// startRedis starts a redis-server with opts in a temp dir of t and stops it when t ends.
func startRedis(t *testing.T, opts servers.RedisOptions) *servers.Redis {
	t.Helper()
	testtier.NeedsServer(t, "redis-server")
	s, err := servers.StartRedis(t.TempDir(), opts)
	if err != nil {
		t.Fatalf("StartRedis(%+v): %v", opts, err)
	}
	t.Cleanup(s.Stop) // registered after TempDir's cleanup, so it runs first
	return s
}

// wantReply checks that the command args, sent to s, answers want.
func wantReply(t *testing.T, s *servers.Redis, want string, args ...string) {
	t.Helper()
	got, err := servers.RedisCommand(s.Addr(), args...)
	if err != nil || got != want {
		t.Errorf("%s on %s: got %q, %v; want %q", strings.Join(args, " "), s.Addr(), got, err, want)
	}
}

// wantRedisDown checks that s is not running and does not answer PING.
func wantRedisDown(t *testing.T, s *servers.Redis) {
	t.Helper()
	if s.Running() {
		t.Error("Running() = true after the server was stopped")
	}
	if reply, err := servers.RedisCommand(s.Addr(), "PING"); err == nil {
		t.Errorf("PING to %s after the server was stopped answered %q", s.Addr(), reply)
	}
}

func TestRedisOptionsArgs(t *testing.T) {
	tests := []struct {
		opts servers.RedisOptions
		want []string // nil: invalid
	}{
		{servers.RedisOptions{}, []string{"--appendonly", "no"}},
		{servers.RedisOptions{AOF: true}, []string{"--appendonly", "yes", "--appendfsync", "everysec"}},
		{servers.RedisOptions{AOF: true, Fsync: "always"}, []string{"--appendonly", "yes", "--appendfsync", "always"}},
		{servers.RedisOptions{AOF: true, Fsync: "no"}, []string{"--appendonly", "yes", "--appendfsync", "no"}},
		{servers.RedisOptions{Fsync: "always"}, nil},
		{servers.RedisOptions{AOF: true, Fsync: "sometimes"}, nil},
	}
	for _, tt := range tests {
		got, err := tt.opts.Args()
		if tt.want == nil {
			if err == nil {
				t.Errorf("%+v.Args() = %q, want an error", tt.opts, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%+v.Args() = %q, %v; want %q", tt.opts, got, err, tt.want)
		}
	}
	if s, err := servers.StartRedis(t.TempDir(), servers.RedisOptions{Fsync: "always"}); err == nil {
		s.Kill()
		t.Error("StartRedis with Fsync but no AOF started a server")
	}
}

func TestRedisKillStopRestart(t *testing.T) {
	t.Parallel()
	s := startRedis(t, servers.RedisOptions{AOF: true, Fsync: "always"})
	if want := "127.0.0.1:" + strconv.Itoa(s.Port()); s.Addr() != want {
		t.Errorf("Addr() = %q, want %q", s.Addr(), want)
	}
	if want := "redis://" + s.Addr() + "/0"; s.URL() != want {
		t.Errorf("URL() = %q, want %q", s.URL(), want)
	}
	if !s.Running() {
		t.Fatal("Running() = false after StartRedis")
	}
	if info, err := servers.RedisCommand(s.Addr(), "INFO", "persistence"); err != nil || !strings.Contains(info, "aof_enabled:1") {
		t.Errorf("INFO persistence: %v\n%s\nwant aof_enabled:1", err, info)
	}
	wantReply(t, s, "OK", "SET", "stock", "42")

	s.Kill()
	wantRedisDown(t, s)
	s.Kill() // a second Kill does nothing
	if err := s.Restart(); err != nil {
		t.Fatalf("Restart after Kill: %v", err)
	}
	wantReply(t, s, "42", "GET", "stock")

	s.Stop()
	wantRedisDown(t, s)
	if err := s.Restart(); err != nil {
		t.Fatalf("Restart after Stop: %v", err)
	}
	wantReply(t, s, "42", "GET", "stock")

	if err := s.Restart(); err != nil { // kills the running server first
		t.Fatalf("Restart of a running server: %v", err)
	}
	wantReply(t, s, "42", "GET", "stock")
}

func TestStartRedisArgsRetriesATakenPort(t *testing.T) {
	testtier.NeedsServer(t, "redis-server")
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port
	picks := 0
	pick := func() (int, error) {
		if picks++; picks == 1 {
			return takenPort, nil
		}
		return servers.FreePort()
	}
	var logged []string
	logf := func(format string, args ...any) { logged = append(logged, format) }

	s, err := servers.StartRedisArgs(t.TempDir(), []string{"--appendonly", "no"}, pick, logf)
	if err != nil {
		t.Fatalf("StartRedisArgs with the first port taken: %v", err)
	}
	t.Cleanup(s.Stop)
	if s.Port() == takenPort || picks != 2 {
		t.Errorf("server on port %d after %d picks, want another port than %d, the second pick", s.Port(), picks, takenPort)
	}
	if len(logged) != 1 || !strings.Contains(logged[0], "taken") {
		t.Errorf("logf told %q, want one line about the port taken", logged)
	}
	wantReply(t, s, "PONG", "PING")
}

func TestStartRedisArgsQuotesLog(t *testing.T) {
	testtier.NeedsServer(t, "redis-server")
	t.Parallel()
	s, err := servers.StartRedisArgs(t.TempDir(), []string{"--no-such-directive", "x"}, servers.FreePort, nil)
	if err == nil {
		s.Kill()
		t.Fatal("StartRedisArgs with a bad directive started a server")
	}
	if !strings.Contains(err.Error(), "server log ends with:") || !strings.Contains(err.Error(), "Bad directive") {
		t.Errorf("StartRedisArgs with a bad directive: got error %v, want one quoting the log's complaint", err)
	}
}

// TestARestartKeepsTheRoleSentinelGaveIt: a server runs from a config file of its own, so a
// replica that Sentinel moved to another master (REPLICAOF, then CONFIG REWRITE) follows that
// master after a restart, not the one it was started under; a restart on the first command line
// made it sync from a stale master and lose acknowledged writes in the nemesis's failovers.
func TestARestartKeepsTheRoleSentinelGaveIt(t *testing.T) {
	first := startRedis(t, servers.RedisOptions{})
	second := startRedis(t, servers.RedisOptions{})
	r, err := servers.StartRedisReplica(t.TempDir(), first.Addr(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	for _, cmd := range [][]string{{"REPLICAOF", "127.0.0.1", strconv.Itoa(second.Port())}, {"CONFIG", "REWRITE"}} {
		if _, err := servers.RedisCommand(r.Addr(), cmd...); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	info, err := servers.RedisCommand(r.Addr(), "INFO", "replication")
	if err != nil || !strings.Contains(info, "master_port:"+strconv.Itoa(second.Port())+"\r\n") {
		t.Fatalf("after the restart the replica follows: %q, %v; want port %d", info, err, second.Port())
	}
}

// TestEveryServerSyncsAReplicaAtOnce: a replica may be promoted (a failover), and a master that
// waits Redis's default 5 s for more replicas to share a transfer keeps a restarted replica out
// of sync, and every write waiting for one refused, for those 5 s.
func TestEveryServerSyncsAReplicaAtOnce(t *testing.T) {
	first := startRedis(t, servers.RedisOptions{})
	r, err := servers.StartRedisReplica(t.TempDir(), first.Addr(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	for _, s := range []*servers.Redis{first, r, r} {
		out, err := servers.RedisCommand(s.Addr(), "CONFIG", "GET", "repl-diskless-sync-delay")
		if err != nil || out != "repl-diskless-sync-delay\n0" {
			t.Fatalf("%s: repl-diskless-sync-delay %q (%v), want 0", s.Addr(), out, err)
		}
		if err := r.Restart(); err != nil { // the second time round, after a restart
			t.Fatal(err)
		}
	}
}
