package redisstore

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/netfault"
	"seckill/internal/redistest"
)

// proxied puts a netfault proxy before each of addrs, closed when t ends, and returns them by
// address with the routes to give Via.
func proxied(t *testing.T, addrs ...string) (map[string]*netfault.Proxy, map[string]string) {
	t.Helper()
	proxies, routes := map[string]*netfault.Proxy{}, map[string]string{}
	for _, addr := range addrs {
		p, err := netfault.Start(addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		proxies[addr], routes[addr] = p, p.Addr()
	}
	return proxies, routes
}

// dialVia is dial through routes.
func dialVia(t *testing.T, spec string, routes map[string]string) redis.UniversalClient {
	t.Helper()
	rdb, err := Dial(t.Context(), spec, Via(routes))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// set writes key within within.
func set(rdb redis.UniversalClient, key string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return rdb.Set(ctx, key, "v", 0).Err()
}

// setSoon writes key, trying for a few seconds: a link just healed is back within them.
func setSoon(t *testing.T, rdb redis.UniversalClient, key string) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err = set(rdb, key, time.Second); err == nil {
			return
		}
	}
	t.Fatalf("SET %s through the healed link: %v", key, err)
}

// TestViaRoutesEveryClusterLink: a cluster client dialled Via a proxy before each node reaches
// every master through that master's proxy, at the address the cluster's own map names it by:
// a partition or a reset there fails the calls on that master's keys, and on no other's; healed,
// they succeed again. (Were a master dialled directly, its calls would pass the fault.)
func TestViaRoutesEveryClusterLink(t *testing.T) {
	c := redistest.StartCluster(t)
	proxies, routes := proxied(t, c.Addrs()...)
	rdb := dialVia(t, c.Seeds(), routes)
	keyOf := map[int]string{} // a key of each master
	for i := 0; len(keyOf) < c.Len() && i < 1000; i++ {
		key := "{via:" + string(rune('a'+i%26)) + string(rune('a'+i/26)) + "}"
		if m := c.MasterOfKey(t, key); keyOf[m] == "" {
			keyOf[m] = key
		}
	}
	if len(keyOf) != c.Len() {
		t.Fatalf("keys on %d of %d masters", len(keyOf), c.Len())
	}
	for _, fault := range []string{netfault.HalfOpen, netfault.Reset} {
		for m, key := range keyOf {
			setSoon(t, rdb, key)
			p := proxies[c.Node(m).Addr()]
			if err := p.Inject(fault, 0); err != nil {
				t.Fatal(err)
			}
			if err := set(rdb, key, 300*time.Millisecond); err == nil {
				t.Errorf("%s before master %d: SET %s succeeded", fault, m, key)
			}
			for other, k := range keyOf {
				if other != m {
					if err := set(rdb, k, 2*time.Second); err != nil {
						t.Errorf("%s before master %d: SET %s on master %d: %v", fault, m, k, other, err)
					}
				}
			}
			if err := p.Heal(); err != nil {
				t.Fatal(err)
			}
			setSoon(t, rdb, key)
		}
	}
}

// TestViaRoutesEverySentinelLink: a Sentinel client dialled Via a proxy before each server and
// sentinel reaches the master through its proxy, the sentinels through theirs (a client whose
// sentinels' links are reset finds no master, while one dialled directly does), and, after a
// failover, the replica the sentinels promote through the replica's.
func TestViaRoutesEverySentinelLink(t *testing.T) {
	master, replica, sentinels, _ := sentinelSetup(t)
	spec := sentinels.Spec("")
	proxies, routes := proxied(t, append([]string{master.Addr(), replica.Addr()}, sentinels.Addrs()...)...)
	rdb := dialVia(t, spec, routes)
	cut := func(addr string) {
		t.Helper()
		if err := set(rdb, "k", 300*time.Millisecond); err != nil {
			t.Fatalf("SET before %s is cut: %v", addr, err)
		}
		if err := proxies[addr].Inject(netfault.HalfOpen, 0); err != nil {
			t.Fatal(err)
		}
		if err := set(rdb, "k", 300*time.Millisecond); err == nil {
			t.Errorf("SET with the master %s cut off: it succeeded", addr)
		}
		if err := proxies[addr].Heal(); err != nil {
			t.Fatal(err)
		}
		setSoon(t, rdb, "k")
	}
	cut(master.Addr())

	for _, s := range sentinels.Addrs() {
		if err := proxies[s].Inject(netfault.Reset, 0); err != nil {
			t.Fatal(err)
		}
	}
	if rdb, err := Dial(t.Context(), spec, Via(routes)); err == nil {
		rdb.Close()
		t.Error("a client whose links to every sentinel are reset found the master")
	}
	dialVia(t, spec, nil) // the sentinels themselves answer
	for _, s := range sentinels.Addrs() {
		if err := proxies[s].Heal(); err != nil {
			t.Fatal(err)
		}
	}

	if n, err := rdb.Do(t.Context(), "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT for the replica: %d, %v", n, err)
	}
	master.Kill()
	if _, err := sentinels.WaitInSync(0, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if m, err := sentinels.Master(); err != nil || m != replica.Addr() {
		t.Fatalf("the sentinels name %q (%v), want %s", m, err, replica.Addr())
	}
	setSoon(t, rdb, "k")
	cut(replica.Addr())
}

// TestSentinelClientServesAsSoonAsItsLinksHeal (the nemesis's Sentinel seed 201): a crowd's
// calls through a bad network that resets every link to the sentinels and the servers fail, and
// the first call once it heals is served. go-redis's own Sentinel client counted each time it
// could not ask a sentinel as a failed dial, and once its pool had counted as many as its size,
// answered every call that last failure without dialling, for up to a second after the heal.
func TestSentinelClientServesAsSoonAsItsLinksHeal(t *testing.T) {
	master, replica, sentinels, _ := sentinelSetup(t)
	proxies, routes := proxied(t, append([]string{master.Addr(), replica.Addr()}, sentinels.Addrs()...)...)
	rdb := dialVia(t, sentinels.Spec(""), routes)
	setSoon(t, rdb, "k")
	for _, p := range proxies {
		if err := p.Inject(netfault.Reset, 0); err != nil {
			t.Fatal(err)
		}
	}
	var calls, failed atomic.Int64
	var wg sync.WaitGroup
	until := time.Now().Add(3 * time.Second) // as long as a nemesis's bad network lasts
	for range 50 {
		wg.Go(func() {
			for time.Now().Before(until) && calls.Load() < 1_000_000 {
				calls.Add(1)
				if set(rdb, "k", 300*time.Millisecond) != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() == 0 {
		t.Fatal("every call passed the reset links")
	}
	for _, p := range proxies {
		if err := p.Heal(); err != nil {
			t.Fatal(err)
		}
	}
	if err := set(rdb, "k", 5*time.Second); err != nil {
		t.Fatalf("the first call once the links healed (%d of %d failed before): %v", failed.Load(), calls.Load(), err)
	}
}
