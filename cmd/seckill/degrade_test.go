package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"seckill/internal/redistest"
)

// TestHungRedisFailsFastAndRecovers freezes Redis (SIGSTOP: connections stay open and nothing
// answers) in the middle of a sale. Grabs must be answered 503 BUSY, each within the gate's call
// deadline (1 s) and then at once from the tripped breaker, never hanging on the client's
// timeouts; /readyz and /metrics must say degraded with the breaker tripped, and the stats shed
// what they cannot ask. A grab answered BUSY
// at its deadline may still run when Redis thaws, so its user retries with the same
// Idempotency-Key and learns its fate. When Redis thaws the sale resumes, and in the end exactly
// the stock is sold, once per user.
func TestHungRedisFailsFastAndRecovers(t *testing.T) {
	t.Parallel() // mostly waits (leases, timers, processes): overlapped with the suite's other waits
	const stock = 60
	rs := redistest.Start(t, redistest.Options{})
	base := startRun(t, testEnv(sqliteDSN(t), "SECKILL_REDIS", rs.URL(), "SECKILL_RATE_USER", "0"))
	c := newClient(t, base)
	id := c.CreateItem(stock, 1, 15*time.Minute)

	winners := map[string]bool{}
	grab := func(user string) (int, string) {
		t.Helper()
		status, body, err := c.CallKeyed("POST", "/api/activities/"+id+"/grab", c.Token(user), "key-"+user, "")
		if err != nil {
			t.Fatalf("grab by %s: %v", user, err)
		}
		if status == http.StatusAccepted {
			if winners[user] {
				t.Fatalf("%s won twice", user)
			}
			winners[user] = true
			return status, ""
		}
		e, _ := body["error"].(map[string]any)
		code, _ := e["code"].(string)
		return status, code
	}
	for i := range stock / 2 {
		if status, code := grab(fmt.Sprint("before-", i)); status != http.StatusAccepted {
			t.Fatalf("grab before the outage: %d %s", status, code)
		}
	}

	rs.Pause(t)
	for i := range 20 {
		start := time.Now()
		status, code := grab(fmt.Sprint("during-", i))
		if took := time.Since(start); status != http.StatusServiceUnavailable || code != "BUSY" || took > 3*time.Second {
			t.Fatalf("grab %d with Redis hung: %d %s after %v; want 503 BUSY within the 1 s deadline", i, status, code, took)
		}
	}
	status, ready, err := c.Call("GET", "/readyz", "", "")
	if err != nil || status != http.StatusServiceUnavailable || ready["level"] != "degraded" {
		t.Fatalf("/readyz with Redis hung: %d %v %v; want 503 and level degraded", status, ready, err)
	}
	// The stats are shed, never refused: the stock is known, the gate's numbers and the
	// database's counts are not asked for.
	status, st, err := c.Call("GET", "/api/admin/activities/"+id+"/stats", testAdmin, "")
	if err != nil || status != http.StatusOK || st["stock"] != float64(stock) || fmt.Sprint(st["shed"]) != "[gate counts]" {
		t.Fatalf("stats with Redis hung: %d %v %v; want 200 with the gate and the counts shed", status, st, err)
	}
	metrics := scrape(t, base)
	for _, want := range []string{"seckill_health_level 2\n", `seckill_breaker_open{dependency="redis"} 1` + "\n",
		`seckill_grab_requests_total{outcome="busy"} 20` + "\n"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics with Redis hung lacks %q", want)
		}
	}
	if strings.Contains(metrics, `seckill_breaker_open{dependency="redis"} 0`+"\n") {
		t.Errorf("/metrics with Redis hung says the breaker is closed")
	}

	rs.Resume(t)
	deadline := time.Now().Add(20 * time.Second)
	retry := func(user string) {
		t.Helper()
		for {
			status, code := grab(user)
			switch {
			case status == http.StatusAccepted || status == http.StatusGone:
				return
			case status == http.StatusServiceUnavailable && time.Now().Before(deadline):
				time.Sleep(50 * time.Millisecond) // the breaker lets a probe through after SECKILL_BREAKER_OPEN
			default:
				t.Fatalf("grab by %s after Redis thawed: %d %s", user, status, code)
			}
		}
	}
	for i := range 20 {
		retry(fmt.Sprint("during-", i))
	}
	for i := 0; len(winners) < stock; i++ {
		retry(fmt.Sprint("after-", i))
	}
	for i := range 10 {
		if status, code := grab(fmt.Sprint("late-", i)); status != http.StatusGone {
			t.Fatalf("grab after the stock is gone: %d %s, want 410", status, code)
		}
	}
	st = c.Drained(id)
	if st["orders"] != float64(stock) || st["created"] != float64(stock) || st["remaining"] != 0.0 {
		t.Fatalf("stats after the sale: %v; want exactly %d orders, none left", st, stock)
	}
}

// TestRiskRulesInTheBinary: SECKILL_RISK_ACCOUNTS_PER_IP reaches the edge. From one address, the
// fourth account must solve a challenge and the fifteenth is blocked; /metrics counts both.
func TestRiskRulesInTheBinary(t *testing.T) {
	base := startRun(t, testEnv(sqliteDSN(t), "SECKILL_RISK_ACCOUNTS_PER_IP", "3"))
	c := newClient(t, base)
	id := c.CreateItem(100, 1, 15*time.Minute)
	var got []string
	for i := range 15 {
		status, body, err := c.Call("POST", "/api/activities/"+id+"/grab", c.Token(fmt.Sprint("farmed-", i)), "")
		if err != nil {
			t.Fatal(err)
		}
		e, _ := body["error"].(map[string]any)
		got = append(got, fmt.Sprintf("%d %v", status, e["code"]))
	}
	want := strings.Repeat("202 <nil> ", 3) + strings.Repeat("403 CHALLENGE_REQUIRED ", 11) + "403 BLOCKED"
	if strings.Join(got, " ") != want {
		t.Fatalf("answers %v, want %s", got, want)
	}
	m := scrape(t, base)
	for _, line := range []string{`seckill_risk_decisions_total{decision="challenge",rule="accounts_per_ip"} 11`,
		`seckill_risk_decisions_total{decision="block",rule="accounts_per_ip"} 1`,
		`seckill_grab_requests_total{outcome="risk_challenge"} 11`} {
		if !strings.Contains(m, line+"\n") {
			t.Errorf("/metrics lacks %q", line)
		}
	}
}

// TestCancelWhileRedisIsAwayRestocks: a buyer cancels while Redis is frozen (SIGSTOP). The
// cancel is the database's and succeeds; the restock the gate could not take is owed, and once
// Redis thaws the sweeper gives the unit back: it sells again without anyone's help, and the
// buyer may buy again.
func TestCancelWhileRedisIsAwayRestocks(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	base := startRun(t, testEnv(sqliteDSN(t), "SECKILL_REDIS", rs.URL(), "SECKILL_RATE_USER", "0"))
	c := newClient(t, base)
	id := c.CreateItem(1, 1, 15*time.Minute)
	o := c.Must("POST", "/api/activities/"+id+"/grab", c.Token("alice"), "", http.StatusAccepted)
	tok := o["order_token"].(string)
	c.Drained(id)

	rs.Pause(t)
	status, body, err := c.Call("POST", "/api/orders/"+tok+"/cancel", c.Token("alice"), "")
	if err != nil || status != http.StatusOK || body["status"] != "CANCELLED" {
		t.Fatalf("cancel with Redis frozen: %d %v %v; want 200 CANCELLED: the cancel is the database's", status, body, err)
	}
	rs.Resume(t)

	deadline := time.Now().Add(20 * time.Second)
	for {
		status, body, err := c.Call("POST", "/api/activities/"+id+"/grab", c.Token("bob"), "")
		if err == nil && status == http.StatusAccepted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("20 s after Redis thawed the cancelled unit does not sell: %d %v %v", status, body, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st := c.Drained(id); st["orders"] != 2.0 || st["cancelled"] != 1.0 || st["created"] != 1.0 || st["remaining"] != 0.0 {
		t.Fatalf("stats after the resale: %v; want alice's order cancelled and bob's created, none left", st)
	}
	// Given back once: alice may buy again, and finds it sold out.
	if status, body, _ := c.Call("POST", "/api/activities/"+id+"/grab", c.Token("alice"), ""); status != http.StatusGone {
		t.Fatalf("alice grabs again: %d %v, want 410 SOLD_OUT (not ALREADY_BOUGHT: her unit was given back)", status, body)
	}
}
