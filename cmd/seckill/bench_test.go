package main

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"seckill/internal/bench"
	"seckill/internal/dbtest"
	"seckill/internal/redisstore"
	"seckill/internal/redistest"
	"seckill/internal/testtier"

	"seckill/internal/e2etest"
)

// noEnv is an empty environment: bench takes its secrets from flags only.
var noEnv map[string]string

// The bench's result and its checks are internal/e2etest's.
type benchResult = e2etest.BenchResult

func checkCPU(t *testing.T, res benchResult, roles ...string) { e2etest.CheckCPU(t, res, roles...) }
func errorsOf(history []bench.Record) map[string]int          { return e2etest.ErrorsOf(history) }

// runBench runs `seckill bench ARGS` in this process, with env as its environment.
func runBench(t *testing.T, env map[string]string, args ...string) (benchResult, []bench.Record) {
	t.Helper()
	return e2etest.Bench(t, func(args []string, stdout io.Writer) error {
		return run(context.Background(), args, env, stdout, os.Stderr)
	}, args...)
}

// checkFlash checks a flash sale's result: demand above the stock, every unit sold once.
func checkFlash(t *testing.T, res benchResult, history []bench.Record, users, dup, stock int64) {
	t.Helper()
	if !res.OK || res.Wins != stock || res.Stock != stock || res.Requests != users*(1+dup) ||
		res.Oversell+res.Undersell+res.Duplicates+res.Lost != 0 {
		t.Fatalf("result %+v; want %d requests and exactly %d wins, no violation", res, users*(1+dup), stock)
	}
	if res.Outcomes["won"].Count != stock || res.Outcomes["error"].Count != 0 {
		t.Fatalf("outcomes %+v; the errors: %v", res.Outcomes, errorsOf(history))
	}
	if res.RPS <= 0 || res.P50 <= 0 || res.P99 < res.P50 || res.P999 < res.P99 {
		t.Fatalf("throughput and latency figures make no sense: %+v", res)
	}
}

// TestBenchEmbedded: docs/testing.md's bench command on the in-process embedded server, 20,000 users
// with a second click each on a stock of 500.
func TestBenchEmbedded(t *testing.T) {
	res, history := runBench(t, noEnv, "--users", "20000", "--stock", "500", "--concurrency", "64")
	checkFlash(t, res, history, 20000, 1, 500)
	if res.Mode != "embedded" {
		t.Fatalf("mode %q", res.Mode)
	}
	won := map[string]bool{}
	for _, r := range history {
		if r.Outcome == bench.Won {
			if won[r.User] {
				t.Fatalf("the history shows %s winning twice", r.User)
			}
			won[r.User] = true
		}
		if r.Start < r.Intended || r.End < r.Start {
			t.Fatalf("times out of order: %+v", r)
		}
	}
}

// TestBenchRedisMariaDB: the same on an in-process server in distributed mode.
func TestBenchRedisMariaDB(t *testing.T) {
	res, history := runBench(t, noEnv, "--users", "20000", "--stock", "500", "--concurrency", "64",
		"--redis", redistest.Start(t, redistest.Options{}).URL(), "--db", dbtest.MySQLDSN(t))
	checkFlash(t, res, history, 20000, 1, 500)
	if res.Mode != "redis" {
		t.Fatalf("mode %q", res.Mode)
	}
}

// TestBenchShardedStockOnACluster: one hot item's stock split into three counters on a real
// three-master Redis Cluster, 6,000 users with a second click each on 300 units: the checker
// finds every unit sold once, nobody twice, the last units found on whatever shard held them.
func TestBenchShardedStockOnACluster(t *testing.T) {
	cluster := redistest.StartCluster(t)
	res, history := runBench(t, noEnv, "--users", "6000", "--stock", "300", "--concurrency", "64", "--stock-shards", "3",
		"--redis", cluster.Seeds(), "--db", dbtest.MySQLDSN(t))
	checkFlash(t, res, history, 6000, 1, 300)
	if res.Mode != "redis" {
		t.Fatalf("mode %q", res.Mode)
	}
	// Each of the three counters sold its part: the units went out of three slots.
	rdb, err := redisstore.Dial(context.Background(), cluster.Seeds())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	var sold int64
	for i := range int64(3) {
		n, err := rdb.HLen(context.Background(), "{act:"+redisstore.ShardID(res.Activity, i)+"}:grabs").Result()
		if err != nil || n == 0 {
			t.Fatalf("shard %d of %s holds %d grabs (%v); want its part of the stock", i, res.Activity, n, err)
		}
		sold += n
	}
	if sold != 300 {
		t.Fatalf("the shards hold %d grabs, want 300", sold)
	}
}

// TestBenchRedPacketRamp: a red packet, the crowd arriving over a ramp, against a server given by
// --url: the shares the winners got sum exactly to the total.
func TestBenchRedPacketRamp(t *testing.T) {
	base := startRun(t, testEnv(sqliteDSN(t)))
	res, history := runBench(t, noEnv, "--url", base, "--jwt-secret", testSecret, "--admin-token", testAdmin,
		"--kind", "redpacket", "--stock", "300", "--total-cents", "100000", "--users", "2000", "--dup", "0",
		"--arrival", "ramp:2s", "--concurrency", "16")
	checkFlash(t, res, history, 2000, 0, 300)
	var sum int64
	for _, r := range history {
		sum += r.Amount
	}
	if sum != 100000 {
		t.Fatalf("the winners got %d cents of 100000", sum)
	}
	if first, last := history[0].Intended, history[len(history)-1].Intended; last-first < 1_500_000 {
		t.Fatalf("the ramp sent everything within %d µs, not over 2 s", last-first)
	}
}

// TestBenchUnpaidOrdersAreResold: a fifth of the winners never pay; their orders expire after a
// 10 s window, the units go back, and the users who lost buy them: in the end the whole stock is
// held by paid or still-open orders, every paid order is PAID and every unpaid one CANCELLED. (The
// window leaves bench time to pay the others even on a loaded machine: a 2 s one expired them all
// under the full suite with -race, which the checker accepted, but then nothing tested paying.)
func TestBenchUnpaidOrdersAreResold(t *testing.T) {
	res, history := runBench(t, noEnv, "--users", "3000", "--dup", "0", "--stock", "300", "--concurrency", "32",
		"--unpaid", "0.2", "--pay-window", "10s")
	if !res.OK || res.Oversell+res.Undersell+res.Duplicates+res.Lost+res.Unreleased != 0 {
		t.Fatalf("result %+v", res)
	}
	if res.Restocked < 30 || res.Restocked > 100 || res.Wins != 300+res.Restocked {
		t.Fatalf("%d wins with %d restocked; want the stock of 300 plus every restocked unit sold again", res.Wins, res.Restocked)
	}
	if int64(len(history)) != 3000+(3000-300) {
		t.Fatalf("%d requests; want 3,000 then one more from each of the 2,700 losers", len(history))
	}
}

// TestBenchWithAPaymentProvider: the winners pay at a simulated provider that calls back after
// a random delay (a quarter after the window, some twice, some after a forged copy), and a
// receiver checks every webhook. Every payment ends kept or refunded, the late ones' units are
// sold again, no forged callback is taken, and every order's events arrive, in order.
func TestBenchWithAPaymentProvider(t *testing.T) {
	res, _ := runBench(t, noEnv, "--users", "1500", "--dup", "0", "--stock", "150", "--concurrency", "32",
		"--unpaid", "0.2", "--pay-window", "6s", "--payments", "--late", "0.25", "--dup-callbacks", "0.3", "--forged", "0.2")
	p := res.Payments
	if !res.OK || p == nil {
		t.Fatalf("result %+v", res)
	}
	if p.Payments < 80 || p.Late == 0 || p.Duplicated == 0 || p.Forged == 0 || p.Kept+p.Refunded != p.Payments || p.Refunded == 0 {
		t.Fatalf("payments %+v; want about 120 taken, some late (refunded), some twice, some forged, each kept or refunded", p)
	}
	if p.Unsigned != 0 || p.Errors != 0 || p.Events < int(res.Wins) {
		t.Fatalf("webhooks %+v; want every post signed and at least an event per order", p)
	}
	if res.Wins != 150+res.Restocked {
		t.Fatalf("%d wins with %d restocked (the unpaid and the refunded); want every unit given back sold again", res.Wins, res.Restocked)
	}
}

// TestBenchPaysAtEachProvider: bench --payments --provider drives Stripe (its API on stripe-mock),
// Alipay and WeChat Pay (their APIs faked on loopback, checking every signature the server
// sends): the buyers pay at the provider, its own notices (some late, some twice, some after a
// forged one) pay the orders, and the server refunds every late payment through the provider's
// refund API by itself, once; the run ends OK.
func TestBenchPaysAtEachProvider(t *testing.T) {
	for _, provider := range []string{"alipay", "wechatpay", "stripe"} {
		t.Run(provider, func(t *testing.T) {
			if provider == "stripe" {
				testtier.NeedsServer(t, "stripe-mock")
			}
			res, _ := runBench(t, noEnv, "--users", "600", "--dup", "0", "--stock", "60", "--concurrency", "32",
				"--unpaid", "0.2", "--pay-window", "4s", "--payments", "--provider", provider, "--late", "0.3", "--forged", "0.3")
			p := res.Payments
			if !res.OK || p == nil || p.Provider != provider {
				t.Fatalf("result %+v", res)
			}
			if p.Late == 0 || p.Forged == 0 || p.Kept+p.Refunded != p.Payments || p.Refunded == 0 || p.RefundsMade != p.Refunded {
				t.Fatalf("payments %+v; want some late, some forged, each kept or refunded, every refund made by the server", p)
			}
		})
	}
}

// TestBenchRefusesBadInput: nonsense gives a clear message and a non-zero exit before any load.
func TestBenchRefusesBadInput(t *testing.T) {
	base := startRun(t, testEnv(sqliteDSN(t)))
	auth := []string{"--url", base, "--jwt-secret", testSecret, "--admin-token", testAdmin}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"zero users", []string{"--users", "0"}, "--users 0"},
		{"negative stock", []string{"--stock", "-5"}, "--stock -5"},
		{"no concurrency", []string{"--concurrency", "0"}, "--concurrency 0"},
		{"negative dup", []string{"--dup", "-1"}, "--dup -1"},
		{"unknown kind", []string{"--kind", "coupon"}, "want item or redpacket"},
		{"bad arrival", []string{"--arrival", "trickle"}, "want burst or ramp"},
		{"bad ramp", []string{"--arrival", "ramp:soon"}, "ramp:DURATION"},
		{"red packet too small", []string{"--kind", "redpacket", "--stock", "10", "--total-cents", "5"}, "needs at least 10 cents"},
		{"stray argument", []string{"now"}, "unexpected arguments"},
		{"unpaid without a window", []string{"--unpaid", "0.1"}, "needs a --pay-window"},
		{"a provider without payments", []string{"--provider", "alipay"}, "--provider is --payments's"},
		{"unpaid above one", []string{"--unpaid", "1.5", "--pay-window", "2s"}, "--unpaid 1.5"},
		{"window too long to wait", []string{"--unpaid", "0.1", "--pay-window", "1h"}, "1s to 10m"},
		{"kill without spawn", []string{"--kill", "api"}, "--fault api needs --spawn"},
		{"kill what", []string{"--spawn", "1", "--kill", "db"}, "want api, worker or redis"},
		{"kill a redis bench did not start", []string{"--kill", "redis"}, "needs --redis spawn"},
		{"outage of a database bench did not start", []string{"--db-outage", "3s"}, "needs --db spawn:mariadb"},
		{"unknown fault", []string{"--fault", "meteor"}, "want api, worker, redis, db, redis-failover"},
		{"a failover of a cluster bench did not start", []string{"--fault", "redis-failover"}, "needs --redis spawn:cluster"},
		{"a reshard of one server", []string{"--redis", "spawn", "--fault", "reshard"}, "needs --redis spawn:cluster"},
		{"a Sentinel failover of a cluster", []string{"--redis", "spawn:cluster", "--fault", "sentinel-failover"}, "needs --redis spawn:sentinel"},
		{"a bad network before a redis bench did not start", []string{"--fault", "netem"}, "needs --redis spawn"},
		{"a bad network of no kind", []string{"--redis", "spawn", "--fault", "netem", "--netem", "rain"}, "want latency, reset or halfopen"},
		{"a bad network on no link", []string{"--redis", "spawn", "--fault", "netem", "--netem-link", "dns"}, "want redis or db"},
		{"an outage of a kill", []string{"--redis", "spawn", "--fault", "redis", "--fault-for", "3s"}, "one fault per run"},
		{"a database down for no time", []string{"--db", "spawn:mariadb", "--fault", "db"}, "needs --fault-for"},
		{"replicas of one server", []string{"--redis", "spawn", "--min-replicas", "1"}, "needs replicas"},
		{"spawn what redis", []string{"--redis", "spawn:ring"}, "want spawn, spawn:cluster or spawn:sentinel"},
		{"spawn what database", []string{"--db", "spawn:oracle"}, "want spawn:mariadb or spawn:postgres"},
		{"two faults", []string{"--redis", "spawn", "--kill", "redis", "--db", "spawn:mariadb", "--db-outage", "1s"}, "one fault per run"},
		{"kill the embedded worker", []string{"--spawn", "1", "--kill", "worker"}, "needs --redis"},
		{"several nodes on sqlite", []string{"--spawn", "2"}, "needs --redis and a MySQL"},
		{"worker nodes in process", []string{"--redis", "spawn", "--workers", "1"}, "--workers needs --spawn and --redis"},
		{"worker nodes on the embedded gate", []string{"--spawn", "1", "--workers", "1"}, "--workers needs --spawn and --redis"},
		{"too many worker nodes", []string{"--spawn", "1", "--redis", "spawn", "--workers", "17"}, "--workers 17"},
		{"kill at 100%", []string{"--spawn", "1", "--kill", "api", "--at", "100%"}, "--at 100%"},
		{"url without secrets", []string{"--url", base}, "needs the server's --jwt-secret"},
		{"db with url", append([]string{"--db", "sqlite:x"}, auth...), "servers bench starts"},
		{"not a url", []string{"--url", "localhost:1", "--jwt-secret", testSecret, "--admin-token", testAdmin}, "want http://host:port"},
		{"unreachable", []string{"--url", "http://127.0.0.1:1", "--jwt-secret", testSecret, "--admin-token", testAdmin}, "not a running seckill server"},
		{"short secret", []string{"--url", base, "--jwt-secret", "short", "--admin-token", testAdmin}, "--jwt-secret"},
		{"wrong secret", []string{"--url", base, "--jwt-secret", strings.Repeat("x", 40), "--admin-token", testAdmin}, "refuses the user tokens"},
		{"wrong admin token", []string{"--url", base, "--jwt-secret", testSecret, "--admin-token", "nope"}, "refuses the admin token"},
		{"unknown admission", []string{"--admission", "raffle"}, "want direct, queue, lottery or reservation"},
		{"reservations without a reservation sale", []string{"--reserved", "10"}, "are for --admission reservation"},
		{"more reservers than users", []string{"--admission", "reservation", "--users", "10", "--reserved", "11"}, "--reserved 11"},
		{"waves without an interval", []string{"--admission", "reservation", "--reserved", "10", "--waves", "3"}, "--wave-interval 0s"},
		{"more reservers coming than reserved", []string{"--admission", "reservation", "--reserved", "10", "--show", "1.5"}, "--show 1.5"},
		{"reservers coming to a direct sale", []string{"--show", "0.5"}, "are for --admission reservation"},
		{"orders expiring between the waves", []string{"--admission", "reservation", "--reserved", "10", "--waves", "3",
			"--wave-interval", "10s", "--pay-window", "40s"}, "must outlive its waves, at least 50s"},
		{"a reservation sale with unpaid orders", []string{"--admission", "reservation", "--reserved", "10", "--unpaid", "0.1",
			"--pay-window", "2s"}, "the crowd at each wave"},
		{"a rate without a line", []string{"--admit-rate", "10"}, "are for --admission queue or lottery"},
		{"a short pre-queue", []string{"--admission", "queue", "--pre-queue", "10ms"}, "--pre-queue 10ms"},
		{"a line with unpaid orders", []string{"--admission", "queue", "--unpaid", "0.1", "--pay-window", "2s"}, "for direct admission"},
		{"payments nobody makes", []string{"--payments"}, "--payments needs --unpaid"},
		{"payments with no window", []string{"--payments", "--unpaid", "0.1"}, "needs a --pay-window"},
		{"payments to a server bench did not start", append([]string{"--payments", "--unpaid", "0.1", "--pay-window", "2s"}, auth...), "servers bench starts"},
		{"late above one", []string{"--payments", "--unpaid", "0.1", "--pay-window", "2s", "--late", "2"}, "--late 2"},
		{"a nemesis of no seed", []string{"--spawn", "1", "--nemesis", "x"}, "want a seed"},
		{"a nemesis with nothing bench started", []string{"--nemesis", "1"}, "it needs --spawn"},
		{"a nemesis and a fault", []string{"--spawn", "1", "--nemesis", "1", "--kill", "api"}, "makes its own faults"},
		{"a nemesis at no rate", []string{"--spawn", "1", "--nemesis", "1", "--rate", "0"}, "--rate 0"},
		{"a nemesis of no time", []string{"--spawn", "1", "--nemesis", "1", "--duration", "0s"}, "--duration 0s"},
		{"a nemesis with nothing to strike", []string{"--spawn", "1", "--nemesis", "1"}, "has nothing to strike"},
		{"a nemesis's payments in no time", []string{"--spawn", "2", "--redis", "spawn", "--db", "spawn:postgres", "--nemesis", "1", "--payments", "--pay-window", "500ms"},
			"at least 1s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := run(context.Background(), append([]string{"bench"}, tc.args...), noEnv, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("bench %v = %v, want an error about %q", tc.args, err, tc.want)
			}
		})
	}
}

// TestBenchAdmission: the queue and lottery modes through the bench, in process. The queue run
// has a crowd larger than the cap and later arrivals behind the early crowd; the lottery's entries
// exceed the stock. The checker reads every ticket back, recomputes the draw from the revealed
// seed and the published entries, and finds the winners the line's first, exactly the stock.
func TestBenchAdmission(t *testing.T) {
	t.Run("queue", func(t *testing.T) {
		res, _ := runBench(t, noEnv, "--admission", "queue", "--users", "6000", "--dup", "0", "--stock", "200",
			"--pre-queue", "1s", "--admit-rate", "2000", "--concurrency", "32")
		l := res.Line
		if !res.OK || l == nil || res.Wins != 200 || l.Winners != 200 || l.Tickets < 200 || l.Early == 0 ||
			l.Early > l.Cap || l.Cap != 2000 || !l.OK() {
			t.Fatalf("result %+v line %+v", res, l)
		}
		if l.Tickets+l.QueueFull != 6000-res.Outcomes["rate_limited"].Count-res.Outcomes["sold_out"].Count {
			t.Fatalf("%d tickets and %d refused full do not account for the 6000 joins: %+v", l.Tickets, l.QueueFull, res.Outcomes)
		}
	})
	t.Run("queue on Redis and MariaDB", func(t *testing.T) {
		res, _ := runBench(t, noEnv, "--admission", "queue", "--users", "4000", "--dup", "1", "--stock", "300",
			"--pre-queue", "1s", "--admit-rate", "1000", "--concurrency", "32",
			"--redis", redistest.Start(t, redistest.Options{}).URL(), "--db", dbtest.MySQLDSN(t))
		l := res.Line
		if !res.OK || res.Mode != "redis" || l == nil || l.Winners != 300 || l.Early == 0 || !l.OK() {
			t.Fatalf("result %+v line %+v", res, l)
		}
	})
	// A reservation sale: 300 of 1,000 users reserve, in three waves 2 s apart, for 250 units;
	// at each opening its wave and the next click, and the 700 strangers at the first. The
	// checker finds no stranger's or early win, every reserver where their number puts them, and
	// the stock sold to the whole first wave and to the next two. How the second and third share
	// it depends on the machine: when the second opening's 200 clicks take over 2 s to answer,
	// the third wave's clicks among them come after its own opening and rightly win before the
	// second wave's last; the third wave takes half its size at least. The server's forecast (the prior:
	// no sale archived yet) is held to the crowd: 240 of the 300 expected, all came, and 1,200
	// clicks at least (the strangers' 700, the waves' 300 and the next waves' 200 early).
	for name, args := range map[string]func(t *testing.T) []string{
		"reservation": func(*testing.T) []string { return nil },
		"reservation on Redis and Postgres": func(t *testing.T) []string {
			return []string{"--redis", redistest.Start(t, redistest.Options{}).URL(), "--db", dbtest.PostgresDSN(t)}
		},
	} {
		t.Run(name, func(t *testing.T) {
			res, _ := runBench(t, noEnv, append([]string{"--admission", "reservation", "--users", "1000", "--reserved", "300",
				"--waves", "3", "--wave-interval", "2s", "--stock", "250", "--concurrency", "32"}, args(t)...)...)
			r := res.Reservation
			if !res.OK || r == nil || !r.OK() || r.Reserved != 300 || res.Wins != 250 || len(r.Waves) != 3 ||
				r.Waves[0].Won != 100 || r.Waves[1].Won+r.Waves[2].Won != 150 || r.Waves[2].Won < 50 || r.Strangers < 700 {
				t.Fatalf("result %+v reservation %+v", res, r)
			}
			if res.Outcomes["not_reserved"].Count == 0 || res.Outcomes["wave_not_open"].Count == 0 {
				t.Fatalf("no stranger refused, or nobody told to wait: %+v", res.Outcomes)
			}
			if f := r.Forecast; f == nil || f.Basis != "prior" || f.ExpectedBuyers != 240 || f.Buyers != 300 || f.Clicks < 1200 || f.PeakRPS < 1 {
				t.Fatalf("the forecast held to the crowd: %+v", f)
			}
		})
	}
	t.Run("lottery", func(t *testing.T) {
		res, _ := runBench(t, noEnv, "--admission", "lottery", "--users", "2000", "--dup", "0", "--stock", "100",
			"--pre-queue", "4s", "--queue-cap", "100000", "--concurrency", "32")
		l := res.Line
		if !res.OK || l == nil || res.Wins != 100 || l.Winners != 100 || l.Tickets <= 100 || l.Early != l.Tickets || !l.OK() {
			t.Fatalf("result %+v line %+v", res, l)
		}
		// Entries after the start are refused: closed, or sold out once the draw has taken the stock.
		if late := l.Closed + res.Outcomes["sold_out"].Count; l.Tickets+late != 2000 {
			t.Fatalf("%d entries and %d refused after the start do not account for the 2000: %+v", l.Tickets, late, res.Outcomes)
		}
	})
}

// TestNemesisReplay: a nemesis run's replay command carries what makes its schedule and crowd,
// and no address (which may hold a password) of a server bench did not start.
func TestNemesisReplay(t *testing.T) {
	c, err := parseBench([]string{"--nemesis", "42", "--duration", "2m", "--rate", "150", "--spawn", "3", "--workers", "1",
		"--redis", "spawn:cluster", "--db", "mysql://root:secret@127.0.0.1:3306/x", "--min-replicas", "1"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := "seckill bench --nemesis 42 --duration 2m0s --rate 150 --concurrency 64 --spawn 3 --workers 1 --redis spawn:cluster --db ADDRESS --min-replicas 1"
	if got := c.replay(); got != want {
		t.Fatalf("replay %q\nwant   %q", got, want)
	}
	// With payments, what the provider does is drawn from the seed and these shares.
	c, err = parseBench([]string{"--nemesis", "7", "--spawn", "2", "--redis", "spawn", "--db", "spawn:postgres", "--payments", "--provider", "alipay",
		"--late", "0.3", "--forged", "0.05"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want = "seckill bench --nemesis 7 --duration 1m0s --rate 100 --concurrency 64 --spawn 2 --redis spawn " +
		"--db spawn:postgres --payments --provider alipay --late 0.3 --dup-callbacks 0.2 --forged 0.05 --pay-window 10s"
	if got := c.replay(); got != want {
		t.Fatalf("replay %q\nwant   %q", got, want)
	}
}
