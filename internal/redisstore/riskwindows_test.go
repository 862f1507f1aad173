package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/breaker"
	"seckill/internal/redistest"
	"seckill/internal/risk"
	"seckill/internal/sale"
)

// riskNode is one node's risk engine: the rules of 10 accounts per address (50: blocked) and the
// cadence, counting in w.
func riskNode(t testing.TB, w risk.Windows) *risk.Engine {
	e, err := risk.Open(risk.Options{Windows: w, Rules: []risk.Rule{
		&risk.AccountsPerIP{ChallengeAbove: 10, BlockAt: 50, Window: time.Minute},
		&risk.Cadence{Clicks: 8, Slowest: 5 * time.Second, Jitter: 0.05},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// guarded is w behind a guard of its own, as a node wires it.
func guarded(w risk.Windows) risk.Windows {
	return breaker.GuardRiskWindows(w, breaker.NewGuard("redis", breaker.GateThresholds, time.Now))
}

// TestRiskWindowsSeeAFarmAcrossNodes: two nodes, each with its own client of one real Redis, and
// a farm of 20 accounts on one address that the load balancer spreads over them, one grab each.
// Counting on Redis, the nodes see the farm whole: past the 10th account every grab is
// challenged, on either node. Each counting in its own memory (the control), each node sees 10
// and lets all 20 through: the gap this closes.
func TestRiskWindowsSeeAFarmAcrossNodes(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	farm := netip.MustParseAddr("203.0.113.9")
	for _, store := range []string{"redis", "memory"} {
		t.Run(store, func(t *testing.T) {
			var nodes [2]*risk.Engine
			for i := range nodes {
				w := risk.NewMemoryWindows(time.Minute)
				if store == "redis" {
					w = guarded(NewRiskWindows(dial(t, srv.URL()), time.Minute))
				}
				nodes[i] = riskNode(t, w)
			}
			challenged := 0
			for i := range 20 {
				v, err := nodes[i%2].Grab(context.Background(), risk.Signal{IP: farm, User: fmt.Sprint(store, "-acct-", i),
					At: t0.Add(time.Duration(i) * time.Second)})
				if err != nil {
					t.Fatal(err)
				}
				if want := risk.Allow; store == "redis" && i >= 10 {
					if v.Decision != risk.Challenge || v.Rule != "accounts_per_ip" {
						t.Errorf("account %d of the farm, on node %d: %+v, want a challenge", i+1, i%2, v)
					}
				} else if v.Decision != want {
					t.Errorf("account %d of the farm, on node %d: %+v, want %v", i+1, i%2, v, want)
				}
				if v.Decision == risk.Challenge {
					challenged++
				}
			}
			t.Logf("%s: %d of the farm's 20 accounts challenged", store, challenged)
		})
	}
}

// TestRiskWindowsCount: what the windows on Redis hold of a grab's keys: the requests before it
// and the distinct users of an address and a fingerprint, the replays of exact signals, a user's
// clicks newest first (even when the nodes' clocks put them out of order), a solve, and all of
// it forgotten once the window has passed; every key expires by itself, and a farm's key keeps
// as many accounts as the rules weigh.
func TestRiskWindowsCount(t *testing.T) {
	rdb := dial(t, redistest.Start(t, redistest.Options{}).URL())
	w := NewRiskWindows(rdb, time.Minute)
	ctx := context.Background()
	count := func(k risk.Keys, at time.Time) risk.Seen {
		t.Helper()
		s, err := w.Count(ctx, k, at)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	k := risk.Keys{IP: "2001:db8::1", Fingerprint: "00112233445566778899aabbccddeeff", Replay: "\x00\x01digest\xff", User: "ann", Clicks: true}
	count(k, t0)
	k.User = "bob"
	count(k, t0.Add(15*time.Second))
	s := count(k, t0.Add(30*time.Second))
	if s.IPRequests != 2 || s.IPUsers != 2 || s.FPRequests != 2 || s.FPUsers != 2 || s.Replays != 2 {
		t.Errorf("the third request: %+v, want 2 before it, 2 users", s)
	}
	if s.Clicks[0] != t0.Add(30*time.Second).UnixNano() || s.Clicks[1] != t0.Add(15*time.Second).UnixNano() || s.Clicks[2] != 0 {
		t.Errorf("bob's clicks %v", s.Clicks)
	}
	// A click stamped earlier by a node whose clock is behind comes in order.
	s = count(risk.Keys{User: "bob", Clicks: true}, t0.Add(29*time.Second))
	if s.Clicks[0] != t0.Add(30*time.Second).UnixNano() || s.Clicks[1] != t0.Add(29*time.Second).UnixNano() {
		t.Errorf("a click from a clock behind: %v", s.Clicks)
	}
	if err := w.Solved(ctx, "bob", 2500*time.Millisecond, t0.Add(31*time.Second)); err != nil {
		t.Fatal(err)
	}
	if s = count(risk.Keys{User: "bob", Clicks: true}, t0.Add(40*time.Second)); !s.Solved || s.Solve != 2500*time.Millisecond {
		t.Errorf("after a solve: %+v", s)
	}
	// 75 s on: the first requests (slice t0) left the window, the 15 s one too; the solve stays.
	s = count(k, t0.Add(75*time.Second))
	if s.IPRequests != 1 || s.IPUsers != 1 || s.Replays != 1 || !s.Solved {
		t.Errorf("75 s on: %+v, want the 30 s request alone, and the solve", s)
	}
	if s.Clicks[0] != t0.Add(75*time.Second).UnixNano() || s.Clicks[3] != t0.Add(29*time.Second).UnixNano() || s.Clicks[4] != 0 {
		t.Errorf("75 s on, bob's clicks %v: want those of the window", s.Clicks)
	}
	if s = count(k, t0.Add(3*time.Minute)); s.IPRequests != 0 || s.IPUsers != 1 || s.Clicks[1] != 0 || s.Solved {
		t.Errorf("3 minutes on: %+v, want nothing of before", s)
	}
	// An address counted first without a user, then with one, in the same slice.
	count(risk.Keys{IP: "192.0.2.50"}, t0)
	if s = count(risk.Keys{IP: "192.0.2.50", User: "x"}, t0); s.IPRequests != 1 || s.IPUsers != 1 {
		t.Errorf("a user after a request without one: %+v", s)
	}
	keys, err := rdb.Keys(ctx, "{risk:*").Result()
	if err != nil || len(keys) < 8 {
		t.Fatalf("keys %v, %v", keys, err)
	}
	for _, key := range keys {
		if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > 70*time.Second {
			t.Errorf("%s expires in %v, want within the window and a slice", key, ttl)
		}
	}
	// A server that forgot the scripts (a restart, a failover) is sent them whole.
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if s = count(k, t0.Add(3*time.Minute)); s.IPRequests != 1 || s.Clicks[1] != t0.Add(3*time.Minute).UnixNano() {
		t.Errorf("after SCRIPT FLUSH: %+v", s)
	}
	// Many accounts on one address: counted exactly up to the most the rules weigh (64 unless
	// they say more), which is all the key keeps of them.
	for _, c := range []struct {
		ip       string
		maxUsers int
	}{{"198.51.100.7", 0}, {"198.51.100.8", 100}} {
		kept := risk.Keys{MaxUsers: c.maxUsers}.UsersKept()
		for i := range 1000 {
			s = count(risk.Keys{IP: c.ip, User: fmt.Sprint("acct-", i), MaxUsers: c.maxUsers}, t0.Add(time.Duration(i)*time.Millisecond))
			if s.IPUsers != min(i+1, kept) || s.IPRequests != i {
				t.Fatalf("account %d of one address, %d kept: %d users, %d requests before", i+1, kept, s.IPUsers, s.IPRequests)
			}
		}
		if n := rdb.ZCard(ctx, riskIPKey(c.ip)+":users").Val(); n != int64(kept) {
			t.Errorf("1000 accounts of one address: %d kept, want %d", n, kept)
		}
	}
}

// TestRiskWindowsDown: Redis gone, a count and a solve fail BUSY, and the node's guard opens
// its breaker after a few.
func TestRiskWindowsDown(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	g := breaker.NewGuard("redis", breaker.Thresholds{CallWithin: 200 * time.Millisecond}, time.Now)
	w := breaker.GuardRiskWindows(NewRiskWindows(dial(t, srv.URL()), time.Minute), g)
	ctx := context.Background()
	if _, err := w.Count(ctx, risk.Keys{IP: "192.0.2.1", User: "ann"}, t0); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	for range 6 {
		if _, err := w.Count(ctx, risk.Keys{IP: "192.0.2.1", User: "ann"}, t0); !errors.Is(err, sale.ErrBusy) {
			t.Fatalf("a count with Redis down: %v, want BUSY", err)
		}
	}
	if err := w.Solved(ctx, "ann", time.Second, t0); !errors.Is(err, sale.ErrBusy) || !strings.Contains(err.Error(), "circuit breaker is open") {
		t.Fatalf("a solve once the breaker is open: %v, want BUSY from the breaker", err)
	}
	srv.Restart(t) // the calls the guard gave up on finish, and the client closes at once
}

// TestRiskWindowsOnACluster: on a three-master Redis Cluster, every call of a grab's pipeline has
// its keys in one slot (its key's hash tag), the calls of one grab go to several slots (and
// nodes) at once, and two nodes' clients count a farm whole.
func TestRiskWindowsOnACluster(t *testing.T) {
	cluster := redistest.StartCluster(t)
	ctx := context.Background()
	var nodes [2]*risk.Engine
	var rdb redis.UniversalClient
	for i := range nodes {
		rdb = dial(t, cluster.Seeds())
		nodes[i] = riskNode(t, guarded(NewRiskWindows(rdb, time.Minute)))
	}
	farm := netip.MustParseAddr("203.0.113.9")
	for i := range 20 {
		v, err := nodes[i%2].Grab(ctx, risk.Signal{IP: farm, User: fmt.Sprint("acct-", i), At: t0.Add(time.Duration(i) * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]risk.Decision{false: risk.Allow, true: risk.Challenge}[i >= 10]; v.Decision != want {
			t.Errorf("account %d of the farm on the cluster: %+v, want %v", i+1, v, want)
		}
	}
	w := NewRiskWindows(rdb, time.Minute)
	k := risk.Keys{IP: "192.0.2.1", Fingerprint: "ffeeddccbbaa99887766554433221100", Replay: "twelve bytes", User: "ann", Clicks: true}
	if s, err := w.Count(ctx, k, t0); err != nil || s.IPUsers != 1 || s.FPUsers != 1 || s.Clicks[0] != t0.UnixNano() {
		t.Fatalf("a grab on the cluster: %+v, %v", s, err)
	}
	slot := func(key string) int64 {
		t.Helper()
		n, err := rdb.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	slots := map[int64]bool{}
	calls := w.plan(k, risk.SliceOf(t0, time.Minute))
	if len(calls) != 4 {
		t.Fatalf("a grab on the cluster in %d calls, want one per key (4)", len(calls))
	}
	for _, c := range calls {
		for _, key := range c.keys[1:] {
			if slot(key) != slot(c.keys[0]) {
				t.Errorf("%s and %s are in two slots: one call would be refused (CROSSSLOT)", c.keys[0], key)
			}
		}
		slots[slot(c.keys[0])] = true
	}
	if len(slots) < 2 {
		t.Errorf("a grab's calls in %d slots: the test shows nothing of a pipeline across slots", len(slots))
	}
	// Every key written is in its tag's slot, and expires.
	var seen atomic.Int64
	err := rdb.(*redis.ClusterClient).ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		keys, err := node.Keys(ctx, "{risk:*").Result()
		for _, key := range keys {
			tag := key[:strings.IndexByte(key, '}')+1]
			if slot(key) != slot(tag) {
				t.Errorf("%s is not in its tag's slot", key)
			}
			if ttl := node.PTTL(ctx, key).Val(); ttl <= 0 {
				t.Errorf("%s does not expire (%v)", key, ttl)
			}
		}
		seen.Add(int64(len(keys)))
		return err
	})
	if err != nil || seen.Load() == 0 {
		t.Fatalf("keys on the masters: %d, %v", seen.Load(), err)
	}
}

// benchModel writes a model weighing every feature, as BenchmarkModelGrab's.
func benchModel(b *testing.B) string {
	path := filepath.Join(b.TempDir(), "model.json")
	m := risk.Model{Format: risk.ModelFormat, Version: "bench", ChallengeAt: 0.6, BlockAt: 0.9}
	for i, name := range risk.FeatureNames {
		m.Features = append(m.Features, risk.Feature{Name: name, Mean: 0.1, Scale: 1, Weight: float64(i%5) - 2})
	}
	data, _ := json.Marshal(m)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkRiskCheck is the risk check of the grab path (risk.Engine.Grab) with the windows in
// the node's memory and on a real Redis (no AOF, on this machine), behind the node's guard as
// serve wires it, for three engines: the cadence alone (a node's default: the user's window),
// the rules that count (accounts per address and cadence: the address's and the user's), and a
// model over every feature (the fingerprint's and the signals' too). Each grab is a new user on
// one of 1,000 addresses and 100 fingerprints. serial: one grab at a time (its latency);
// parallel: 16 goroutines per CPU (a crowd's). On Redis, the CPU Redis spent a grab.
func BenchmarkRiskCheck(b *testing.B) {
	model := benchModel(b)
	rdb := benchRedis(b)
	for _, judge := range []string{"cadence", "rules", "model"} {
		for _, store := range []string{"memory", "redis"} {
			for _, mode := range []string{"serial", "parallel"} {
				b.Run(judge+"/"+store+"/"+mode, func(b *testing.B) {
					o := risk.Options{Rules: []risk.Rule{&risk.Cadence{Clicks: 8, Slowest: 5 * time.Second, Jitter: 0.05}}}
					if judge != "cadence" {
						o.Rules = append(o.Rules, &risk.AccountsPerIP{ChallengeAbove: 1000, BlockAt: 5000, Window: time.Minute})
					}
					if judge == "model" {
						o.Features, o.ModelPath = risk.NewFeatures(time.Minute, nil), model
					}
					if store == "redis" {
						o.Windows = guarded(NewRiskWindows(rdb, time.Minute))
					}
					e, err := risk.Open(o)
					if err != nil {
						b.Fatal(err)
					}
					var n atomic.Int64
					grab := func() {
						i := n.Add(1)
						s := risk.Signal{IP: netip.AddrFrom4([4]byte{10, 0, byte(i % 1000 >> 8), byte(i % 1000)}),
							User: "u" + strconv.FormatInt(i, 10), At: time.Now(),
							Page: &risk.Page{Moves: int(i%200) + 1, PathPx: 2000, DirectionEntropy: 2, SpeedCV: 0.7,
								LoadToClick: 5 * time.Second, Fingerprint: prints[i%100]}}
						if _, err := e.Grab(context.Background(), s); err != nil {
							b.Fatal(err)
						}
					}
					cpu := redisCPU(b, rdb)
					b.ReportAllocs()
					if mode == "serial" {
						for b.Loop() {
							grab()
						}
					} else {
						b.SetParallelism(16)
						b.RunParallel(func(pb *testing.PB) {
							for pb.Next() {
								grab()
							}
						})
					}
					if store == "redis" {
						b.ReportMetric((redisCPU(b, rdb)-cpu)*1e6/float64(b.N), "redis-cpu-µs/grab")
					}
				})
			}
		}
	}
}

// prints are 100 device fingerprints.
var prints = func() (out [100]string) {
	for i := range out {
		out[i] = fmt.Sprintf("%032x", i)
	}
	return out
}()

// BenchmarkRiskWindowsMemory is what the windows on Redis hold a grab for a window and a slice
// (70 s), in Redis's used memory: each grab a new user, with the keys of a model's check
// (address, fingerprint, signals, user) all new, or its address and fingerprint shared by 50
// (a farm's), or the user's alone (the cadence, a node's default).
func BenchmarkRiskWindowsMemory(b *testing.B) {
	rdb := benchRedis(b)
	w := NewRiskWindows(rdb, time.Minute)
	ctx := context.Background()
	for _, shape := range []string{"all-new", "farm-of-50", "cadence"} {
		b.Run(shape, func(b *testing.B) {
			rdb.FlushAll(ctx)
			before := redistest.UsedMemory(b, rdb)
			at := time.Now()
			i := 0
			for b.Loop() {
				k := risk.Keys{IP: fmt.Sprint("10.", i>>16&255, ".", i>>8&255, ".", i&255), User: fmt.Sprint("user-", i), Clicks: true,
					Fingerprint: fmt.Sprintf("%032x", i), Replay: fmt.Sprint("digest-", i)}
				switch shape {
				case "farm-of-50":
					k.IP, k.Fingerprint = fmt.Sprint("10.0.", i/50>>8&255, ".", i/50&255), fmt.Sprintf("%032x", i/50)
				case "cadence":
					k = risk.Keys{User: k.User, Clicks: true}
				}
				if _, err := w.Count(ctx, k, at); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(redistest.UsedMemory(b, rdb)-before)/float64(b.N), "redis-B/grab")
		})
	}
}
