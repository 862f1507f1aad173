package redistest_test

import (
	"net"
	"os/exec"
	"strings"
	"testing"

	"seckill/internal/redistest"
)

// run runs redis-cli against addr with args (options such as -c first, then the command) and
// returns its output, trimmed. redis-cli prints error replies and exits 0; it exits non-zero
// when it cannot connect.
func run(addr string, args ...string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	out, err := exec.Command("redis-cli", append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// cli is run that fails t if redis-cli fails.
func cli(t *testing.T, addr string, args ...string) string {
	t.Helper()
	out, err := run(addr, args...)
	if err != nil {
		t.Fatalf("redis-cli -h/-p %s %s: %v\n%s", addr, strings.Join(args, " "), err, out)
	}
	return out
}

// want checks that redis-cli with args answers want.
func want(t *testing.T, addr, want string, args ...string) {
	t.Helper()
	if got := cli(t, addr, args...); got != want {
		t.Errorf("%s on %s: got %q, want %q", strings.Join(args, " "), addr, got, want)
	}
}

// wantDown checks that the server at addr does not accept connections.
func wantDown(t *testing.T, addr string) {
	t.Helper()
	if out, err := run(addr, "PING"); err == nil {
		t.Fatalf("PING to %s after it was stopped answered %q", addr, out)
	}
}

func TestStartGivesDistinctServers(t *testing.T) {
	t.Parallel()
	s1, s2 := redistest.Start(t, redistest.Options{}), redistest.Start(t, redistest.Options{})
	if s1.Addr() == s2.Addr() {
		t.Fatalf("two servers at the same address %s", s1.Addr())
	}
	for _, s := range []*redistest.Server{s1, s2} {
		if !strings.HasPrefix(s.Addr(), "127.0.0.1:") {
			t.Errorf("Addr() = %q, want 127.0.0.1:PORT", s.Addr())
		}
		if want := "redis://" + s.Addr() + "/0"; s.URL() != want {
			t.Errorf("URL() = %q, want %q", s.URL(), want)
		}
	}
	want(t, s1.Addr(), "OK", "SET", "stock", "42")
	want(t, s1.Addr(), "42", "GET", "stock")
	want(t, s2.Addr(), "", "GET", "stock")
	want(t, s1.Addr(), "appendonly\nno", "CONFIG", "GET", "appendonly")
}

func TestKillRestartWithAOFAlwaysKeepsData(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redistest.Options{AOF: true, Fsync: "always"})
	want(t, s.Addr(), "appendfsync\nalways", "CONFIG", "GET", "appendfsync")
	want(t, s.Addr(), "OK", "SET", "stock", "42")
	want(t, s.Addr(), "41", "DECR", "stock")

	s.Kill()
	wantDown(t, s.Addr())
	s.Restart(t)
	want(t, s.Addr(), "41", "GET", "stock")
}

func TestKillRestartWithoutAOFLosesData(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redistest.Options{})
	want(t, s.Addr(), "OK", "SET", "stock", "42")

	s.Kill()
	wantDown(t, s.Addr())
	s.Restart(t)
	want(t, s.Addr(), "0", "EXISTS", "stock")
}

func TestStopRestartWithAOFEverysecKeepsData(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redistest.Options{AOF: true})
	want(t, s.Addr(), "appendfsync\neverysec", "CONFIG", "GET", "appendfsync")
	want(t, s.Addr(), "OK", "SET", "stock", "42")

	s.Stop() // a clean shutdown flushes the AOF
	wantDown(t, s.Addr())
	s.Stop() // a second Stop does nothing
	s.Restart(t)
	want(t, s.Addr(), "42", "GET", "stock")
}

// tags are hash tags that together hit all three masters: {a} is in slot 15495, {b} in 3300,
// {c} in 7365.
var tags = []string{"a", "b", "c", "d", "e", "f"}

func TestClusterSpreadsKeysOverAllNodes(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t)
	addrs := c.Addrs()
	if len(addrs) != 3 {
		t.Fatalf("Addrs() = %q, want 3 addresses", addrs)
	}
	if want := strings.Join(addrs, ","); c.Seeds() != want {
		t.Errorf("Seeds() = %q, want %q", c.Seeds(), want)
	}
	for i, addr := range addrs {
		if c.Node(i).Addr() != addr {
			t.Errorf("Node(%d).Addr() = %q, want %q", i, c.Node(i).Addr(), addr)
		}
		if info := cli(t, addr, "CLUSTER", "INFO"); !strings.Contains(info, "cluster_state:ok") {
			t.Errorf("CLUSTER INFO on %s:\n%s\nwant cluster_state:ok", addr, info)
		}
	}

	owners := make(map[string]bool)
	for _, tag := range tags {
		key := "{" + tag + "}x"
		want(t, addrs[0], "OK", "-c", "SET", key, "v"+tag) // -c follows MOVED
		owner := ""
		for _, addr := range addrs {
			switch got := cli(t, addr, "GET", key); {
			case got == "v"+tag:
				if owner != "" {
					t.Errorf("key %s is on both %s and %s", key, owner, addr)
				}
				owner = addr
			case !strings.HasPrefix(got, "MOVED "):
				t.Errorf("GET %s on %s: got %q, want the value or a MOVED redirection", key, addr, got)
			}
		}
		if owner == "" {
			t.Errorf("key %s is on no node", key)
		}
		owners[owner] = true
		want(t, addrs[2], "v"+tag, "-c", "GET", key)
	}
	if len(owners) != 3 {
		t.Errorf("keys with tags %q are on %d nodes, want all 3", tags, len(owners))
	}
}

func TestClusterNodeKillRestart(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t)
	addrs := c.Addrs()
	node := c.Node(0) // owns slots 0-5460, {b}x among them
	want(t, addrs[1], "OK", "-c", "SET", "{b}x", "1")

	node.Kill()
	wantDown(t, node.Addr())
	node.Restart(t)
	c.WaitOK(t)
	// Without persistence the key is gone, but the node has its slots back.
	want(t, addrs[1], "", "-c", "GET", "{b}x")
	want(t, addrs[1], "OK", "-c", "SET", "{b}x", "2")
	want(t, node.Addr(), "2", "GET", "{b}x")
}
