package redisstore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill/internal/redistest"
	"seckill/internal/servers"
)

// sentinelSetup is a master with one replica and three sentinels, and the Spec of a client.
func sentinelSetup(t *testing.T) (master, replica *redistest.Server, sentinels *redistest.Sentinels, s Spec) {
	t.Helper()
	master = redistest.Start(t, redistest.Options{})
	replica = redistest.StartReplica(t, master)
	sentinels = redistest.StartSentinels(t, master, servers.SentinelOptions{})
	s, err := ParseSpec(sentinels.Spec(""))
	if err != nil {
		t.Fatal(err)
	}
	return master, replica, sentinels, s
}

// TestSentinelDialDefersARefusedMaster: a dial of the master the sentinels name, once it is
// killed, returns a connection whose first write answers the dial's refusal (which topology
// still calls refused: nothing was sent); once they name its replica, a dial connects to the new
// master, whatever address it is given; with every sentinel down, it connects to the master they
// named last, and a dialer that never heard one refuses the same way.
func TestSentinelDialDefersARefusedMaster(t *testing.T) {
	master, replica, sentinels, s := sentinelSetup(t)
	d := newMasterDialer(s, newRouter(s))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	master.Kill()
	conn, err := d.Dial(ctx, "tcp", master.Addr())
	if err != nil {
		t.Fatalf("dial the killed master: %v, want a connection that fails on use", err)
	}
	if got := conn.RemoteAddr().String(); got != master.Addr() {
		t.Errorf("the refused connection is to %s, want %s", got, master.Addr())
	}
	if _, err := conn.Write([]byte("PING\r\n")); !refused(err) {
		t.Errorf("a write on the refused connection: %v, want the dial's refusal", err)
	}
	conn.Close()

	if _, err := sentinels.WaitInSync(0, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if m, err := sentinels.Master(); err != nil || m != replica.Addr() {
		t.Fatalf("the sentinels name %q (%v), want %s", m, err, replica.Addr())
	}
	conn, err = d.Dial(ctx, "tcp", master.Addr())
	if err != nil {
		t.Fatalf("dial the old master after the failover: %v", err)
	}
	defer conn.Close()
	if got := conn.RemoteAddr().String(); got != replica.Addr() {
		t.Errorf("the dial of the old master connected to %s, want the new one %s", got, replica.Addr())
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		t.Errorf("a write to the new master: %v", err)
	}

	// With no sentinel to ask, the master they named last; and none before any has named one.
	sentinels.Stop()
	conn2, err := d.Dial(ctx, "tcp", "")
	if err != nil {
		t.Fatalf("dial with the sentinels down: %v", err)
	}
	defer conn2.Close()
	if got := conn2.RemoteAddr().String(); got != replica.Addr() {
		t.Errorf("with the sentinels down, the dial connected to %s, want the master they named last, %s", got, replica.Addr())
	}
	conn3, err := newMasterDialer(s, newRouter(s)).Dial(ctx, "tcp", "")
	if err != nil {
		t.Fatalf("a first dial with the sentinels down: %v, want a connection that fails on use", err)
	}
	if _, err := conn3.Write([]byte("PING\r\n")); !refused(err) || !errors.Is(err, errNoMaster) {
		t.Errorf("a first dial with the sentinels down: a write answered %v, want %v", err, errNoMaster)
	}
}

// TestSentinelDialSkipsAMasterTheyFailOver (the nemesis's Sentinel seed 85): the master is
// killed, and restarted as soon as one sentinel names its replica, as a supervisor would restart
// it: it comes back a master, its configuration says so, until the sentinels make it a replica.
// A replica they have not told of the new master yet syncs from it again, so a write there is
// acknowledged by WAIT and lost when they do. The dials of it (go-redis asked a sentinel that
// had not heard of the failover yet) must never reach it: each is refused, or connects to the
// promoted replica. go-redis's own dialer, and this one before it asked every sentinel, connected
// to it at once.
func TestSentinelDialSkipsAMasterTheyFailOver(t *testing.T) {
	master, replica, sentinels, s := sentinelSetup(t)
	d := newMasterDialer(s, newRouter(s))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	master.Kill()
	for !anySentinelNames(sentinels, replica.Addr()) {
		if ctx.Err() != nil {
			t.Fatalf("no sentinel named %s within a minute of the master's death", replica.Addr())
		}
		time.Sleep(5 * time.Millisecond)
	}
	master.Restart(t)
	turned, refusals, reached := false, 0, 0
	for !turned || reached == 0 {
		if ctx.Err() != nil {
			t.Fatalf("the restarted master not made a replica (%v), or no dial reached the new master (%d), within a minute", turned, reached)
		}
		info, err := servers.RedisCommand(master.Addr(), "INFO", "replication")
		turned = err == nil && strings.Contains(info, "role:slave")
		conn, err := d.Dial(ctx, "tcp", master.Addr())
		if err != nil {
			t.Fatalf("dial the old master: %v", err)
		}
		if _, ok := conn.(refusedConn); ok {
			if _, err := conn.Write([]byte("PING\r\n")); !refused(err) {
				t.Fatalf("a refused dial's connection answered %v, want a refusal", err)
			}
			refusals++
		} else if got := conn.RemoteAddr().String(); got != replica.Addr() {
			t.Fatalf("a dial of the old master, restarted while the sentinels fail it over, connected to %s (want %s, or a refusal)",
				got, replica.Addr())
		} else {
			if _, err := conn.Write([]byte("PING\r\n")); err != nil {
				t.Fatalf("a write to the new master: %v", err)
			}
			reached++
		}
		conn.Close()
		time.Sleep(2 * time.Millisecond)
	}
	t.Logf("until the old master was a replica: %d dials connected to the new master, %d refused", reached, refusals)
}

// anySentinelNames reports whether a sentinel names addr as the master.
func anySentinelNames(sentinels *redistest.Sentinels, addr string) bool {
	for _, s := range sentinels.Addrs() {
		out, err := servers.RedisCommand(s, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", sentinels.Name())
		if err == nil && strings.ReplaceAll(out, "\n", ":") == addr {
			return true
		}
	}
	return false
}

// TestSentinelViewOfAFailover: what the dialer makes of the sentinels' answers at each step of
// a failover. M is the master, R the replica one of them (the leader) promotes.
func TestSentinelViewOfAFailover(t *testing.T) {
	const m, r = "127.0.0.1:1", "127.0.0.1:2"
	names := func(epoch int64, master string) said { return said{epoch: epoch, named: master} }
	failing := said{epoch: 2, named: m, failingOver: true}
	for _, c := range []struct {
		name        string
		answers     []said
		master      string
		failingOver bool
	}{
		{"before the failover", []said{names(2, m), names(2, m), names(2, m)}, m, false},
		{"the leader elected, no replica promoted yet", []said{failing, names(2, m), names(2, m)}, "", true},
		{"another still a candidate, not elected", []said{names(2, m), failing, names(2, m)}, "", true},
		{"the leader promoted R, the others not told yet", []said{names(3, r), names(2, m), names(2, m)}, r, false},
		{"a candidate that lost, not told yet", []said{names(3, r), failing, names(2, m)}, r, false},
		{"the leader down, the others told", []said{names(3, r), names(3, r)}, r, false},
		{"at the newest epoch, two masters", []said{names(3, r), names(3, m)}, "", true},
	} {
		v := viewOf(c.answers, time.Now())
		if !v.answered || v.failingOver != c.failingOver || !c.failingOver && v.master != c.master {
			t.Errorf("%s: master %q, failing over %v; want %q, %v", c.name, v.master, v.failingOver, c.master, c.failingOver)
		}
	}
	if v := viewOf(nil, time.Now()); v.answered {
		t.Errorf("no answer: %+v, want answered false", v)
	}
}

// TestSentinelClientFollowsAFailoverAtOnce: through the client Dial makes, a crowd of calls
// fails while the sentinels call the killed master down (go-redis's pool counts every failed
// dial, and stops dialling once the count reaches its size); once every sentinel names the
// replica, the next call succeeds on it. With go-redis's own dialer the pool still answered the
// dead master's "connection refused" then, until its once-a-second probe connected (0.71 to
// 0.75 s later, 7 to 9 calls).
func TestSentinelClientFollowsAFailoverAtOnce(t *testing.T) {
	master, replica, sentinels, _ := sentinelSetup(t)
	rdb := dial(t, sentinels.Spec(""))
	ctx := t.Context()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT for the replica: %d, %v", n, err)
	}

	master.Kill()
	var wg sync.WaitGroup
	failed := make(chan error, 64)
	for range 64 {
		wg.Go(func() {
			call, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			if err := rdb.Ping(call).Err(); err != nil {
				failed <- err
			}
		})
	}
	wg.Wait()
	close(failed)
	n := 0
	for err := range failed {
		if n++; n == 1 {
			t.Logf("a call while the master is down: %v", err)
		}
	}
	if n == 0 {
		t.Fatal("every call succeeded with the master killed")
	}
	if _, err := sentinels.WaitInSync(0, 60*time.Second); err != nil { // every sentinel names one master
		t.Fatal(err)
	}
	if m, err := sentinels.Master(); err != nil || m != replica.Addr() {
		t.Fatalf("the sentinels name %q (%v), want %s", m, err, replica.Addr())
	}
	named := time.Now()
	call, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(call).Err(); err != nil {
		t.Fatalf("the first call once every sentinel named %s: %v", replica.Addr(), err)
	}
	t.Logf("%d of 64 calls failed in the failover; the first call once every sentinel named the new master took %v",
		n, time.Since(named).Round(time.Millisecond))
	if got, err := rdb.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Errorf("k on the new master: %q, %v", got, err)
	}
}
