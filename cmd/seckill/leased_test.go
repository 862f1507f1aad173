package main

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"seckill/internal/dbtest"
	"seckill/internal/redistest"
	"seckill/internal/servers"
)

// TestScheduledReconcileReportsAndRepairsDrift runs two nodes on one Redis and MariaDB with
// SECKILL_RECONCILE_EVERY=1s and gives two units to an activity's stock behind everyone's back
// (a restock nobody cancelled for). The scheduled rounds find the drift and a node exports it
// as seckill_reconcile_drift, leaving the gate as it is (report only). Once they stop, a node
// started with SECKILL_RECONCILE_REPAIR=on takes the lease over and repairs the drift, which
// then reads 0.
func TestScheduledReconcileReportsAndRepairsDrift(t *testing.T) {
	t.Parallel() // mostly waits (leases, timers, processes): overlapped with the suite's other waits
	rs := redistest.Start(t, redistest.Options{})
	dsn := dbtest.MySQLDSN(t)
	env := func(more ...string) map[string]string {
		return testEnv(dsn, append([]string{"SECKILL_REDIS", rs.URL(), "SECKILL_RATE_USER", "0"}, more...)...)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	a, doneA := launch(t, ctx, env("SECKILL_RECONCILE_EVERY", "1s"))
	b, doneB := launch(t, ctx, env("SECKILL_RECONCILE_EVERY", "1s"))
	c := newClient(t, a)
	id := c.CreateItem(10, 1, 15*time.Minute)
	for i := range 3 {
		if status, body, err := c.Call("POST", "/api/activities/"+id+"/grab", c.Token(fmt.Sprint("u", i)), ""); err != nil || status != http.StatusAccepted {
			t.Fatalf("grab %d: %d %v %v", i, status, body, err)
		}
	}
	c.Drained(id)
	if _, err := servers.RedisCommand(rs.Addr(), "INCRBY", "{act:"+id+"}:stock", "2"); err != nil {
		t.Fatal(err)
	}

	drift := regexp.MustCompile(`seckill_reconcile_drift\{activity="` + id + `"\} (-?[0-9.e+]+)`)
	// waitDrift waits up to 20 s for one of the nodes at bases to export a drift of want.
	waitDrift := func(want string, bases ...string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		var seen []string
		for time.Now().Before(deadline) {
			seen = seen[:0]
			for _, base := range bases {
				m := drift.FindStringSubmatch(scrape(t, base))
				if m != nil && m[1] == want {
					return
				}
				seen = append(seen, fmt.Sprint(m))
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("no node exported a drift of %s for %s within 20 s; last seen %v", want, id, seen)
	}
	waitDrift("2", a, b)
	time.Sleep(1500 * time.Millisecond) // another round or more: report only, nothing repaired
	_, st, err := c.Call("GET", "/api/admin/activities/"+id+"/stats", testAdmin, "")
	if err != nil || st["remaining"] != 9.0 {
		t.Fatalf("stats after report-only rounds: %v, %v; want remaining 9, the drift left for an operator", st, err)
	}
	for _, base := range []string{a, b} {
		if m := scrape(t, base); strings.Contains(m, `seckill_reconcile_checks_total{outcome="repaired"}`) {
			t.Fatalf("a report-only node repaired:\n%s", m)
		}
	}

	stop()
	for _, done := range []<-chan error{doneA, doneB} {
		if err := <-done; err != nil {
			t.Fatalf("a report-only node: %v", err)
		}
	}
	c = newClient(t, startRun(t, env())) // the API, its rounds an hour away
	repairer := startRun(t, env("SECKILL_RECONCILE_EVERY", "1s", "SECKILL_RECONCILE_REPAIR", "on"))
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, st, err = c.Call("GET", "/api/admin/activities/"+id+"/stats", testAdmin, "")
		if err == nil && st["remaining"] == 7.0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats with a repairing node: %v, %v; want remaining 7 within 20 s", st, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if m := scrape(t, repairer); !strings.Contains(m, `seckill_reconcile_checks_total{outcome="repaired"} 1`) {
		t.Fatalf("the repairing node did not count its repair:\n%s", m)
	}
	waitDrift("0", repairer)
}

// TestArchiveDropsTheHotStateOfAFinishedSale runs a node on Redis with SECKILL_ARCHIVE_AFTER=1s
// and a sale that ends two seconds after it starts, its pay window three. Once it is over
// and its order paid, its keys leave Redis; the stats and the order still answer, from the
// database, without bringing them back.
func TestArchiveDropsTheHotStateOfAFinishedSale(t *testing.T) {
	t.Parallel() // mostly waits (leases, timers, processes): overlapped with the suite's other waits
	rs := redistest.Start(t, redistest.Options{})
	base := startRun(t, testEnv(sqliteDSN(t), "SECKILL_REDIS", rs.URL(), "SECKILL_RATE_USER", "0", "SECKILL_ARCHIVE_AFTER", "1s"))
	c := newClient(t, base)
	now := time.Now().UTC()
	id := c.Must("POST", "/api/admin/activities", testAdmin, fmt.Sprintf(
		`{"name":"brief","kind":"item","stock":5,"price_cents":100,"start_at":%q,"end_at":%q,"pay_window_s":3}`,
		now.Add(-time.Second).Format(time.RFC3339), now.Add(2*time.Second).Format(time.RFC3339)), http.StatusCreated)["id"].(string)
	_, g, err := c.Call("POST", "/api/activities/"+id+"/grab", c.Token("buyer"), "")
	if err != nil || g["order_token"] == nil {
		t.Fatalf("grab: %v, %v", g, err)
	}
	tok := g["order_token"].(string)
	c.Drained(id)
	c.Must("POST", "/api/orders/"+tok+"/pay", c.Token("buyer"), "", http.StatusOK)

	keys := func() string {
		t.Helper()
		out, err := servers.RedisCommand(rs.Addr(), "KEYS", "{act:"+id+"}*")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	if keys() == "" {
		t.Fatal("the sale holds no keys in Redis while it runs")
	}
	deadline := time.Now().Add(20 * time.Second)
	for keys() != "" {
		if time.Now().After(deadline) {
			t.Fatalf("the finished sale's keys are still in Redis 20 s on: %s", keys())
		}
		time.Sleep(100 * time.Millisecond)
	}
	st := c.Stats(id)
	if st["remaining"] != 4.0 || st["paid"] != 1.0 || st["stock"] != 5.0 {
		t.Fatalf("stats of the archived sale: %v; want 4 remaining, 1 paid", st)
	}
	if o := c.Must("GET", "/api/orders/"+tok, c.Token("buyer"), "", http.StatusOK); o["status"] != "PAID" {
		t.Fatalf("the archived sale's order: %v", o)
	}
	if k := keys(); k != "" {
		t.Fatalf("reading the archived sale brought keys back: %s", k)
	}
}
