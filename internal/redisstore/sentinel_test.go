package redisstore

import (
	"context"
	"net"
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
// still calls refused: nothing was sent); once they name its replica, a dial of the killed
// master (go-redis asked a sentinel that had not heard of the failover yet) connects to the new
// master; a refused address the sentinels do not know (a sentinel down) fails as a dial.
func TestSentinelDialDefersARefusedMaster(t *testing.T) {
	master, replica, sentinels, s := sentinelSetup(t)
	d := newMasterDialer(s)
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

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nobody := l.Addr().String()
	l.Close()
	if conn, err := d.Dial(ctx, "tcp", nobody); err == nil {
		conn.Close()
		t.Errorf("dial %s, where nothing listens, succeeded", nobody)
	} else if !refused(err) {
		t.Errorf("dial %s, where nothing listens: %v, want refused", nobody, err)
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
