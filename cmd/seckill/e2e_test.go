package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"seckill/internal/browsertest"
	"seckill/internal/dbtest"
	"seckill/internal/redistest"

	"seckill/internal/node"
)

// TestFlashCrowd: 10,000 users, many clicking more than once, on a stock of 100, through the
// real program on a free port. Exactly 100 distinct users win, every other click is 409 or 410,
// and after the queue drains there are exactly 100 orders, one per winner.
func TestFlashCrowd(t *testing.T) { flashCrowd(t, sqliteDSN(t)) }

// The same crowd with the store and the queue on MariaDB, then PostgreSQL (one node, no Redis).
func TestFlashCrowdOnMariaDB(t *testing.T)  { flashCrowd(t, dbtest.MySQLDSN(t)) }
func TestFlashCrowdOnPostgres(t *testing.T) { flashCrowd(t, dbtest.PostgresDSN(t)) }

// The distributed mode: Redis gate and streams with MariaDB, then a Redis Cluster with PostgreSQL.
func TestFlashCrowdRedisMariaDB(t *testing.T) {
	flashCrowd(t, dbtest.MySQLDSN(t), "SECKILL_REDIS", redistest.Start(t, redistest.Options{}).URL())
}

func TestFlashCrowdClusterPostgres(t *testing.T) {
	flashCrowd(t, dbtest.PostgresDSN(t), "SECKILL_REDIS", redistest.StartCluster(t).Seeds())
}

func flashCrowd(t *testing.T, dsn string, env ...string) {
	const users, stock = 10_000, 100
	base := startRun(t, testEnv(dsn, env...))
	c := newClient(t, base)
	id := c.CreateItem(stock, 1, 15*time.Minute)

	names := make([]string, users)
	for i := range names {
		names[i] = fmt.Sprint("user-", i)
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	outs := c.Crowd(id, names, 1, 64, nil, nil)
	outs = append(outs, c.Crowd(id, names[:users/4], 0, 64, nil, nil)...) // a quarter click a third time

	winners := map[string]string{}
	codes := map[string]int{}
	for _, o := range outs {
		if o.Err != nil {
			t.Fatalf("click by %s got no answer: %v", o.User, o.Err)
		}
		switch o.Status {
		case http.StatusAccepted:
			if prev, ok := winners[o.User]; ok {
				t.Fatalf("%s won twice: %s and %s", o.User, prev, o.Token)
			}
			winners[o.User] = o.Token
		case http.StatusConflict, http.StatusGone:
			codes[o.Code]++
		default:
			t.Fatalf("click by %s: %d %s", o.User, o.Status, o.Code)
		}
	}
	if len(winners) != stock {
		t.Fatalf("%d users won, want %d", len(winners), stock)
	}
	if codes["SOLD_OUT"] == 0 || codes["ALREADY_BOUGHT"]+codes["SOLD_OUT"] != len(outs)-stock {
		t.Fatalf("rejections %v do not account for the %d losing clicks", codes, len(outs)-stock)
	}
	st := c.Drained(id)
	if st["orders"] != float64(stock) || st["created"] != float64(stock) || st["remaining"] != 0.0 {
		t.Fatalf("stats after the sale: %v", st)
	}
	for user, token := range winners {
		o := c.Must("GET", "/api/orders/"+token, c.Token(user), "", http.StatusOK)
		if o["status"] != "CREATED" {
			t.Fatalf("%s's order %s is %v", user, token, o["status"])
		}
	}
	// Three winners pay (one of them twice), two cancel.
	n := 0
	for user, token := range winners {
		switch {
		case n < 3:
			c.Must("POST", "/api/orders/"+token+"/pay", c.Token(user), "", http.StatusOK)
			if n == 0 {
				c.Must("POST", "/api/orders/"+token+"/pay", c.Token(user), "", http.StatusOK)
			}
		case n < 5:
			c.Must("POST", "/api/orders/"+token+"/cancel", c.Token(user), "", http.StatusOK)
		}
		n++
	}
	if rec := c.Must("POST", "/api/admin/activities/"+id+"/reconcile", testAdmin, "", http.StatusOK); rec["ok"] != true {
		t.Fatalf("reconcile after the sale: %v", rec)
	}
	// The node's metrics count the same sale: its wins, its losing clicks, its orders. An order
	// is counted once its commit has returned, a moment after the database has it: the scrape
	// waits for the counts, for a while.
	text := scrape(t, base)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(text, fmt.Sprintf("seckill_orders_total{event=\"created\"} %d\n", stock)) &&
		time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		text = scrape(t, base)
	}
	soldOut := 0
	for _, line := range strings.Split(text, "\n") {
		for _, name := range []string{`seckill_grab_requests_total{outcome="sold_out"} `, `seckill_grab_requests_total{outcome="sold_out_edge"} `} {
			if n, ok := strings.CutPrefix(line, name); ok {
				v, _ := strconv.Atoi(n)
				soldOut += v
			}
		}
	}
	wants := []string{
		fmt.Sprintf(`seckill_grab_requests_total{outcome="won"} %d`, stock),
		fmt.Sprintf(`seckill_orders_total{event="created"} %d`, stock),
		`seckill_orders_total{event="paid"} 3`,
		`seckill_orders_total{event="cancelled"} 2`,
		// the two cancelled units are back in the gate, and the queue is drained
		fmt.Sprintf(`seckill_stock_remaining{activity="%s"} 2`, id),
		fmt.Sprintf(`seckill_queue_depth{activity="%s"} 0`, id),
	}
	if n := codes["ALREADY_BOUGHT"]; n > 0 { // a counter never incremented has no line
		wants = append(wants, fmt.Sprintf(`seckill_grab_requests_total{outcome="already_bought"} %d`, n))
	}
	for _, want := range wants {
		if !strings.Contains(text, want+"\n") {
			name, _, _ := strings.Cut(want, " ")
			var got []string
			for _, line := range strings.Split(text, "\n") {
				if strings.HasPrefix(line, name+" ") {
					got = append(got, line)
				}
			}
			t.Errorf("/metrics lacks %q; it has %q", want, got)
		}
	}
	if soldOut != codes["SOLD_OUT"] {
		t.Errorf("/metrics counts %d sold-out answers (edge and gate), the crowd got %d", soldOut, codes["SOLD_OUT"])
	}
}

// TestZeroSetupStart runs the program as `go run ./cmd/seckill` would, with no configuration at
// all (but a temporary working directory): it seeds the demo activity, serves dev login, and
// prints the admin token.
func TestZeroSetupStart(t *testing.T) {
	t.Chdir(t.TempDir())
	env := map[string]string{"SECKILL_ADDR": "127.0.0.1:0", "SECKILL_METRICS_ADDR": "127.0.0.1:0"}
	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	lines := make(chan string, 16)
	stdout := &lineWriter{line: func(l string) { out.WriteString(l); lines <- l }}
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, env, stdout, io.Discard) }()
	var base, admin string
	for base == "" || admin == "" {
		select {
		case l := <-lines:
			if u, ok := strings.CutPrefix(strings.TrimSpace(l), "seckill listening on "); ok {
				base = u
			}
			if a, ok := strings.CutPrefix(strings.TrimSpace(l), "admin token: "); ok {
				admin = a
			}
		case err := <-done:
			t.Fatalf("run ended: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatalf("no address and admin token printed: %q", out.String())
		}
	}
	c := newClient(t, base)
	login := c.Must("POST", "/api/login", "", `{"user":"alice"}`, http.StatusOK)
	grab := c.Must("POST", "/api/activities/demo/grab", login["token"].(string), "", http.StatusAccepted)
	if grab["order_token"] == "" {
		t.Fatalf("demo grab: %v", grab)
	}
	if st := c.Must("GET", "/api/admin/activities/demo/stats", admin, "", http.StatusOK); st["stock"] != 100.0 {
		t.Fatalf("demo stats: %v", st)
	}
	pages(t, base, admin)

	// An admin watching the live stream does not hold the shutdown up.
	req, _ := http.NewRequest("GET", base+"/api/admin/activities/demo/events", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("live stream: %v %v", resp, err)
	}
	defer resp.Body.Close()
	bufio.NewReader(resp.Body).ReadString('\n')
	stopped := time.Now()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if d := time.Since(stopped); d > 10*time.Second { // Shutdown would wait 30 s for the stream
		t.Errorf("shutdown took %v with a live stream open", d)
	}
	for _, want := range []string{"/activity/demo", "/activity/demo-redpacket", "/activity/demo-queue", "/admin"} {
		if !strings.Contains(out.String(), base+want) {
			t.Errorf("%s was not printed: %q", base+want, out.String())
		}
	}
}

// pages checks that the binary serves the pages, and that the demo's product page and red
// packet page come up in a real browser.
func pages(t *testing.T, base, admin string) {
	t.Helper()
	for path, want := range map[string]string{"/": "<title>seckill — sales</title>", "/activity/demo": `src="/static/activity.js?v=`,
		"/admin": "<title>seckill — dashboard</title>"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) || resp.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("GET %s: %d, CSP %q, body %.100q; want %q", path, resp.StatusCode,
				resp.Header.Get("Content-Security-Policy"), b, want)
		}
	}
	b := browsertest.New(t, 1280, 900)
	b.Do(chromedp.Navigate(base + "/"))
	b.WaitFor(`document.querySelectorAll("#activities li").length === 3`, 10*time.Second, "the three demo activities listed")
	b.Do(chromedp.Navigate(base + "/activity/demo-queue"))
	b.WaitFor(`!document.getElementById("product").hidden && document.getElementById("admission-label").textContent === "Waiting line" && document.getElementById("fairness").textContent.includes("shuffled at the start")`,
		10*time.Second, "the demo waiting line's page")
	b.Do(chromedp.Navigate(base + "/activity/demo-redpacket"))
	b.WaitFor(`!document.getElementById("product").hidden && document.getElementById("name").textContent === "Demo red packet"`,
		10*time.Second, "the demo red packet's page")
	b.Do(chromedp.Navigate(base + "/admin"))
	b.Do(chromedp.WaitVisible(chromedp.ID("token")))
	b.Do(chromedp.SendKeys(chromedp.ID("token"), admin),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("auth").requestSubmit()`))
	b.WaitFor(`document.getElementById("pick").options.length === 4`, 10*time.Second, "the dashboard's activity list")
}

func TestRunRefusesBadConfiguration(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown command", []string{"launch"}, nil, "unknown command"},
		{"unknown flag", []string{"serve", "-bogus"}, nil, "bogus"},
		{"short secret", nil, map[string]string{"SECKILL_JWT_SECRET": "short", "SECKILL_ADDR": "127.0.0.1:0"}, "at least 32 bytes"},
		{"bad demo", nil, map[string]string{"SECKILL_DEMO": "maybe"}, "SECKILL_DEMO"},
		{"bad redis", nil, map[string]string{"SECKILL_REDIS": "localhost", "SECKILL_ADDR": "127.0.0.1:0"}, "want redis://"},
		{"redis down", nil, map[string]string{"SECKILL_REDIS": "redis://127.0.0.1:1/0", "SECKILL_ADDR": "127.0.0.1:0"}, "redis"},
		{"other database", nil, map[string]string{"SECKILL_DB": "oracle://x", "SECKILL_ADDR": "127.0.0.1:0"}, "want sqlite:PATH"},
		{"bad log level", []string{"-log-level", "loud"}, nil, "log level"},
		{"unknown role", nil, map[string]string{"SECKILL_ROLE": "boss"}, "want all, api or worker"},
		{"api node without redis", []string{"-role", "api"}, nil, "needs SECKILL_REDIS"},
		{"worker node without redis", nil, map[string]string{"SECKILL_ROLE": "worker"}, "needs SECKILL_REDIS"},
		{"bad claim idle", nil, map[string]string{"SECKILL_CLAIM_IDLE": "soon"}, "SECKILL_CLAIM_IDLE"},
		{"zero claim idle", []string{"-claim-idle", "0s"}, nil, "positive duration"},
		{"negative user rate", nil, map[string]string{"SECKILL_RATE_USER": "-1"}, "SECKILL_RATE_USER"},
		{"words for an IP rate", []string{"-rate-ip", "lots"}, nil, "SECKILL_RATE_IP"},
		{"huge global rate", nil, map[string]string{"SECKILL_RATE_GLOBAL": "99999999999"}, "SECKILL_RATE_GLOBAL"},
		{"a webhook without its secret", nil, map[string]string{"SECKILL_WEBHOOK_URL": "https://shop.test/hook"}, "at least 16 bytes"},
		{"a webhook secret without a webhook", nil, map[string]string{"SECKILL_WEBHOOK_SECRET": "a secret of some length"}, "without SECKILL_WEBHOOK_URL"},
		{"a webhook of no scheme", nil, map[string]string{"SECKILL_WEBHOOK_URL": "shop.test/hook", "SECKILL_WEBHOOK_SECRET": "a secret of some length"}, "want http(s)://host/path"},
		{"a webhook with a password", nil, map[string]string{"SECKILL_WEBHOOK_URL": "https://u:p@shop.test/hook", "SECKILL_WEBHOOK_SECRET": "a secret of some length"}, "no user or password"},
		{"a payment secret without a checkout", nil, map[string]string{"SECKILL_PAYMENT_SECRET": "a secret of some length"}, "without SECKILL_PAYMENT_URL"},
		{"a checkout without a payment secret", nil, map[string]string{"SECKILL_PAYMENT_URL": "https://pay.test/checkout"}, "without SECKILL_PAYMENT_SECRET"},
		{"a short payment secret", nil, map[string]string{"SECKILL_PAYMENT_URL": "https://pay.test/checkout", "SECKILL_PAYMENT_SECRET": "short"}, "at least 16 bytes"},
		{"a checkout of no scheme", nil, map[string]string{"SECKILL_PAYMENT_URL": "pay.test/checkout", "SECKILL_PAYMENT_SECRET": "a secret of some length"}, "want http(s)://host/path"},
		{"a Kafka broker without a port", nil, map[string]string{"SECKILL_KAFKA_BROKERS": "kafka.shop.test"}, "want host:port"},
		{"a Kafka topic with a slash", nil, map[string]string{"SECKILL_KAFKA_BROKERS": "127.0.0.1:9092", "SECKILL_KAFKA_TOPIC": "orders/2026"}, "SECKILL_KAFKA_TOPIC"},
		{"a webhook twice", nil, map[string]string{"SECKILL_WEBHOOK_URL": "https://shop.test/a,https://shop.test/a", "SECKILL_WEBHOOK_SECRET": "a secret of some length"}, "twice"},
		{"bad trusted proxy", nil, map[string]string{"SECKILL_TRUSTED_PROXIES": "10.0.0.0/8, proxy.example"}, "neither a CIDR nor an address"},
		{"slow gate in words", nil, map[string]string{"SECKILL_SLOW_GATE": "slow"}, "SECKILL_SLOW_GATE"},
		{"zero slow database", []string{"-slow-db", "0s"}, nil, "SECKILL_SLOW_DB"},
		{"fail rate over one", nil, map[string]string{"SECKILL_FAIL_RATE": "5"}, "SECKILL_FAIL_RATE"},
		{"negative breaker", []string{"-breaker-open", "-2s"}, nil, "SECKILL_BREAKER_OPEN"},
		{"negative accounts per IP", nil, map[string]string{"SECKILL_RISK_ACCOUNTS_PER_IP": "-1"}, "SECKILL_RISK_ACCOUNTS_PER_IP"},
		{"cadence maybe", nil, map[string]string{"SECKILL_RISK_CADENCE": "maybe"}, "SECKILL_RISK_CADENCE"},
		{"negative solve time", []string{"-risk-min-solve", "-1s"}, nil, "SECKILL_RISK_MIN_SOLVE"},
		{"reconcile every millisecond", nil, map[string]string{"SECKILL_RECONCILE_EVERY": "1ms"}, "SECKILL_RECONCILE_EVERY"},
		{"reconcile every hour in words", []string{"-reconcile-every", "hourly"}, nil, "SECKILL_RECONCILE_EVERY"},
		{"reconcile repair maybe", nil, map[string]string{"SECKILL_RECONCILE_REPAIR": "maybe"}, "SECKILL_RECONCILE_REPAIR"},
		{"archive after a while", nil, map[string]string{"SECKILL_ARCHIVE_AFTER": "a while"}, "SECKILL_ARCHIVE_AFTER"},
		{"archive before the end", []string{"-archive-after", "-1h"}, nil, "SECKILL_ARCHIVE_AFTER"},
		{"a JWKS URL that is no URL", nil, map[string]string{"SECKILL_JWKS_URL": "keycloak"}, "SECKILL_JWKS_URL"},
		{"a JWKS URL over FTP", []string{"-jwks-url", "ftp://id.example.test/certs"}, nil, "https://"},
		{"an issuer without a provider", nil, map[string]string{"SECKILL_JWT_ISSUER": "https://id.example.test"}, "need SECKILL_JWKS_URL"},
		{"an empty user claim", []string{"-jwt-user-claim", ""}, nil, "SECKILL_JWT_USER_CLAIM"},
		{"a provider nobody serves", nil, map[string]string{"SECKILL_JWKS_URL": "http://127.0.0.1:1/certs", "SECKILL_ADDR": "127.0.0.1:0"}, "identity provider's keys"},
		{"an admin without a role", nil, map[string]string{"SECKILL_ADMIN_TOKENS": "grafana::0123456789abcdef"}, "want viewer or operator"},
		{"an admin with a short token", nil, map[string]string{"SECKILL_ADMIN_TOKENS": "grafana:viewer:short"}, "at least 16"},
		{"an admin named twice", nil, map[string]string{"SECKILL_ADMIN_TOKENS": "ops:operator:0123456789abcdef,ops:viewer:fedcba9876543210"}, "named twice"},
		{"an admin called admin", nil, map[string]string{"SECKILL_ADMIN_TOKENS": "admin:viewer:0123456789abcdef"}, "named twice"},
		{"an admin with the admin token", nil, map[string]string{"SECKILL_ADMIN_TOKEN": "0123456789abcdef", "SECKILL_ADMIN_TOKENS": "ops:viewer:0123456789abcdef"}, "SECKILL_ADMIN_TOKEN's token"},
		{"pprof on a bad address", nil, map[string]string{"SECKILL_PPROF": "nowhere:x", "SECKILL_ADDR": "127.0.0.1:0", "SECKILL_METRICS_ADDR": "127.0.0.1:0"}, "SECKILL_PPROF"},
		{"metrics on no port", nil, map[string]string{"SECKILL_METRICS_ADDR": "127.0.0.1"}, "SECKILL_METRICS_ADDR"},
		{"metrics on an address not this machine's", nil, map[string]string{"SECKILL_METRICS_ADDR": "192.0.2.1:9464", "SECKILL_ADDR": "127.0.0.1:0"}, "SECKILL_METRICS_ADDR"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			err := run(context.Background(), tc.args, tc.env, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run = %v, want an error about %q", err, tc.want)
			}
		})
	}
}

// TestGracefulShutdownKeepsAcknowledgedGrabs stops the program (as SIGTERM would) while a crowd
// is grabbing: in-flight requests drain, the batcher flushes, and after a restart on the same
// data every acknowledged grab has its order.
func TestGracefulShutdownKeepsAcknowledgedGrabs(t *testing.T) {
	t.Parallel() // mostly waits (leases, timers, processes): overlapped with the suite's other waits
	env := testEnv(sqliteDSN(t))
	ctx, cancel := context.WithCancel(context.Background())
	base, done := launch(t, ctx, env)
	c := newClient(t, base)
	id := c.CreateItem(5000, 1, 15*time.Minute)
	users := make([]string, 4000)
	for i := range users {
		users[i] = fmt.Sprint("u", i)
	}
	var acked atomic.Int64
	stopAt := func() bool {
		if acked.Load() >= 300 {
			cancel() // shut down mid-crowd
		}
		return ctx.Err() != nil
	}
	outs := c.Crowd(id, users, 0, 32, func(o outcome) {
		if o.Status == http.StatusAccepted {
			acked.Add(1)
		}
	}, stopAt)
	if err := <-done; err != nil {
		t.Fatalf("run after shutdown: %v", err)
	}

	c = newClient(t, startRun(t, env))
	c.Drained(id)
	n := 0
	for _, o := range outs {
		if o.Status != http.StatusAccepted {
			continue
		}
		n++
		if got := c.Must("GET", "/api/orders/"+o.Token, c.Token(o.User), "", http.StatusOK); got["status"] != "CREATED" {
			t.Fatalf("grab %s acknowledged before shutdown is %v after restart", o.Token, got["status"])
		}
	}
	if n < 300 {
		t.Fatalf("only %d grabs were acknowledged before the shutdown", n)
	}
}

// TestRateLimitIsSharedByTheNodes: in distributed mode a user's limit is kept on Redis, checked
// by the grab's own script, so spreading clicks over two nodes gains nothing; the bucket is the
// activity's, and its refusal is a 429 with Retry-After, counted as the user's limit.
func TestRateLimitIsSharedByTheNodes(t *testing.T) {
	env := testEnv(dbtest.MySQLDSN(t), "SECKILL_REDIS", redistest.Start(t, redistest.Options{}).URL(), "SECKILL_RATE_USER", "2")
	a, b := newClient(t, startRun(t, env)), newClient(t, startRun(t, env))
	id := a.CreateItem(100, 1, 15*time.Minute)
	grab := "/api/activities/" + id + "/grab"
	a.Must("POST", grab, a.Token("alice"), "", http.StatusAccepted)
	b.Must("POST", grab, b.Token("alice"), "", http.StatusConflict)
	// The gate's own call checks the bucket (one Redis call a grab): its refusal says when to
	// come back, and the metrics name the user's limit.
	req, err := http.NewRequest("POST", a.Base+grab, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.Token("alice"))
	resp, err := a.HTTP().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" || !strings.Contains(string(body), `"RATE_LIMITED"`) {
		t.Fatalf("alice's third click in a second, on the first node again: %d, Retry-After %q, %s",
			resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if m := scrape(t, a.Base); !strings.Contains(m, `seckill_grab_requests_total{outcome="rate_limited_user"} 1`) {
		t.Errorf("the metrics do not count the refusal as the user's limit:\n%s", grepLines(m, "seckill_grab_requests_total"))
	}
	b.Must("POST", grab, b.Token("bob"), "", http.StatusAccepted)
	// The bucket is the activity's: alice's first click on another one passes.
	other := a.CreateItem(100, 1, 15*time.Minute)
	b.Must("POST", "/api/activities/"+other+"/grab", b.Token("alice"), "", http.StatusAccepted)
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

// TestBlacklistReachesEveryNode: a user blocked through one node is refused by the other once it
// has reloaded the blacklist (every node.ReloadEvery), and unblocked the same way. The test waits
// three reload periods rather than probing, since a probe before the reload would be a real grab.
func TestBlacklistReachesEveryNode(t *testing.T) {
	t.Parallel() // mostly waits (leases, timers, processes): overlapped with the suite's other waits
	env := testEnv(dbtest.MySQLDSN(t), "SECKILL_REDIS", redistest.Start(t, redistest.Options{}).URL())
	a, b := newClient(t, startRun(t, env)), newClient(t, startRun(t, env))
	id := a.CreateItem(100, 1, 15*time.Minute)
	grab := "/api/activities/" + id + "/grab"
	a.Must("POST", "/api/admin/blocks", testAdmin, `{"kind":"user","value":"mallory","reason":"bot"}`, http.StatusCreated)
	a.Must("POST", grab, a.Token("mallory"), "", http.StatusForbidden) // at once on the node that took it
	time.Sleep(3 * node.ReloadEvery)
	if m := b.Must("POST", grab, b.Token("mallory"), "", http.StatusForbidden); m["error"].(map[string]any)["code"] != "BLOCKED" {
		t.Fatalf("the other node: %v", m)
	}
	a.Must("DELETE", "/api/admin/blocks/user/mallory", testAdmin, "", http.StatusNoContent)
	time.Sleep(3 * node.ReloadEvery)
	b.Must("POST", grab, b.Token("mallory"), "", http.StatusAccepted)
}

// TestRedPacketLeaderboardInTheBinary: the binary wires the leaderboard to its workers: after a
// rain its board lists every share, largest first, and /metrics says what it costs.
func TestRedPacketLeaderboardInTheBinary(t *testing.T) {
	base := startRun(t, testEnv(sqliteDSN(t)))
	c := newClient(t, base)
	now := time.Now().UTC()
	id := c.Must("POST", "/api/admin/activities", testAdmin, fmt.Sprintf(
		`{"name":"rain","kind":"redpacket","count":20,"total_cents":2000,"start_at":%q,"end_at":%q}`,
		now.Add(-time.Second).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339)), http.StatusCreated)["id"].(string)
	for i := range 30 {
		status, _, err := c.Call("POST", "/api/activities/"+id+"/grab", c.Token(fmt.Sprint("u", i)), "")
		if err != nil || (status != http.StatusAccepted && status != http.StatusGone) {
			t.Fatalf("grab %d: %d %v", i, status, err)
		}
	}
	c.Drained(id)
	board := c.Must("GET", "/api/activities/"+id+"/leaderboard?limit=100", "", "", http.StatusOK)
	entries, _ := board["entries"].([]any)
	if len(entries) != 20 || board["strategy"] != "exact" {
		t.Fatalf("leaderboard after the rain: %v", board)
	}
	sum, prev := 0.0, 1e18
	for _, e := range entries {
		a := e.(map[string]any)["amount_cents"].(float64)
		if a > prev {
			t.Fatalf("the board is not largest first: %v", entries)
		}
		prev, sum = a, sum+a
	}
	if sum != 2000 {
		t.Fatalf("the board's shares sum to %v, want 2000", sum)
	}
	if m := scrape(t, base); !strings.Contains(m, `seckill_leaderboard_bytes{activity="`+id+`",strategy="exact"}`) {
		t.Errorf("/metrics lacks the leaderboard's memory")
	}
}

// TestMetricsOnTheirOwnListener: the metrics (every activity's counters, the node's health) are
// served on SECKILL_METRICS_ADDR, never on the API's port, which the public reaches: there
// GET /metrics is not found, on an API node and a worker node alike. By default the listener is
// on loopback.
func TestMetricsOnTheirOwnListener(t *testing.T) {
	c, err := parseServe(nil, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if host, _, _ := net.SplitHostPort(c.metricsAddr); host != "127.0.0.1" || c.metricsAddr == c.addr {
		t.Errorf("SECKILL_METRICS_ADDR defaults to %q, want loopback, apart from the API's %s", c.metricsAddr, c.addr)
	}
	env := testEnv(sqliteDSN(t))
	rs := redistest.Start(t, redistest.Options{})
	worker := testEnv(sqliteDSN(t), "SECKILL_REDIS", rs.URL(), "SECKILL_ROLE", node.RoleWorker)
	for name, base := range map[string]string{"all": startRun(t, env), "worker": startRun(t, worker)} {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), "seckill_") {
			t.Errorf("%s node: GET /metrics on the API's port: %d %q, want 404", name, resp.StatusCode, body)
		}
		at, _ := metricsOf.Load(base)
		if u, _ := at.(string); strings.HasPrefix(u, base) || !strings.HasPrefix(u, "http://127.0.0.1:") {
			t.Errorf("%s node: metrics at %q, API at %s: want a listener of their own", name, u, base)
		}
		if m := scrape(t, base); !strings.Contains(m, "seckill_health_level 0\n") {
			t.Errorf("%s node: its metrics listener serves no health level:\n%s", name, m)
		}
	}
}
