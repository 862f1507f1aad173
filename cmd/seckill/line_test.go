package main

import (
	"bufio"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/dbtest"
	"seckill/internal/redistest"
	"seckill/internal/sale"

	"seckill/internal/node"

	"seckill/internal/e2etest"
)

// createLined creates an item under admission (queue or lottery) that starts at start, with rate
// admissions a second.
func createLined(c *client, admission string, stock, rate int, start time.Time) string {
	c.T().Helper()
	body := fmt.Sprintf(`{"name":"line","kind":"item","stock":%d,"price_cents":100,"start_at":%q,"end_at":%q,"admission":%q,"admit_rate":%d}`,
		stock, start.Format(time.RFC3339), start.Add(time.Hour).Format(time.RFC3339), admission, rate)
	return c.Must("POST", "/api/admin/activities", testAdmin, body, http.StatusCreated)["id"].(string)
}

// joins has users join activity id's line through base, conc at a time, and returns the ticket
// token of every join answered 202 by user: early, those the server placed by the draw (joined
// before the start), and late, those it placed on arrival. stop, if set, ends the crowd early.
func joins(c *client, id string, users []string, conc int, stop func() bool) (early, late map[string]string) {
	c.T().Helper()
	var mu sync.Mutex
	early, late = map[string]string{}, map[string]string{}
	work := make(chan string)
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for u := range work {
				status, m, err := c.Call("POST", "/api/activities/"+id+"/grab", c.Token(u), "")
				if err != nil || status != http.StatusAccepted {
					continue // a node killed under the crowd: not acknowledged, nothing owed
				}
				mu.Lock()
				if m["early"] == true {
					early[u] = m["queue_token"].(string)
				} else {
					late[u] = m["queue_token"].(string)
				}
				mu.Unlock()
			}
		})
	}
	for _, u := range users {
		if stop != nil && stop() {
			break
		}
		work <- u
	}
	close(work)
	wg.Wait()
	return early, late
}

// lineStats returns the line part of id's stats.
func lineStats(c *client, id string) map[string]any {
	c.T().Helper()
	return c.Stats(id)["line"].(map[string]any)
}

// answered waits until nobody waits in id's line.
func answered(c *client, id string) {
	c.T().Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if lineStats(c, id)["waiting"] == 0.0 {
			return
		}
		if time.Now().After(deadline) {
			c.T().Fatalf("the line still waits after 60s: %v", lineStats(c, id))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// drawOrder reads the revealed seed and the published entries of id and recomputes the draw.
func drawOrder(c *client, id string) []string {
	c.T().Helper()
	a := c.Must("GET", "/api/activities/"+id, "", "", http.StatusOK)
	line := a["line"].(map[string]any)
	seed, err := sale.ParseSeed(line["draw_seed"].(string))
	if err != nil {
		c.T().Fatal(err)
	}
	if got := seed.Commitment(); got != line["draw_commitment"] {
		c.T().Fatalf("the revealed seed hashes to %s; the commitment published was %v", got, line["draw_commitment"])
	}
	resp, err := c.HTTP().Get(c.Base + line["entries_url"].(string))
	if err != nil {
		c.T().Fatal(err)
	}
	defer resp.Body.Close()
	var entries []string
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		entries = append(entries, sc.Text())
	}
	return sale.DrawOrder(seed, entries)
}

// checkLine checks every acknowledged ticket of id after the line is answered: those among the
// first stock places of the draw's order won, with an order each; everyone else was answered
// loser; nobody was lost; exactly stock orders. (A join whose answer a kill swallowed is in the
// line too, and may hold one of the first places: it is not ours to ask about.)
func checkLine(c *client, id string, stock int, early, late map[string]string, loser string) {
	c.T().Helper()
	answered(c, id)
	order := drawOrder(c, id)
	owner := map[string]string{}
	for u, tok := range early {
		owner[tok] = u
	}
	if len(order) < len(early) {
		c.T().Fatalf("%d entries published, %d early joins acknowledged", len(order), len(early))
	}
	won, first := 0, 0 // acknowledged tickets that won, and that are among the first stock places
	for place, tok := range order {
		u, acked := owner[tok]
		if !acked {
			continue // a join whose answer the kill swallowed: it is in the line, and may win
		}
		if place < stock {
			first++
		}
		v := c.Must("GET", "/api/queue/"+tok, c.Token(u), "", http.StatusOK)
		want := loser
		if place < stock {
			want = "WON"
		}
		if v["status"] != want {
			c.T().Fatalf("early ticket at place %d of %s: %v, want %s", place, u, v, want)
		}
		if want == "WON" {
			won++
			o := c.Must("GET", "/api/orders/"+v["order_token"].(string), c.Token(u), "", http.StatusOK)
			if o["activity_id"] != id {
				c.T().Fatalf("the order of %s: %v", u, o)
			}
		}
	}
	for u, tok := range late {
		if v := c.Must("GET", "/api/queue/"+tok, c.Token(u), "", http.StatusOK); v["status"] != loser {
			c.T().Fatalf("late ticket of %s: %v, want %s behind a crowd larger than the stock", u, v, loser)
		}
	}
	if st := c.Drained(id); won != first || st["orders"] != float64(stock) || st["remaining"] != 0.0 {
		c.T().Fatalf("%d acknowledged early tickets won, %d are among the first %d places; stats %v: want exactly %d orders",
			won, first, stock, st, stock)
	}
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(prefix, i)
	}
	return out
}

// TestKillNineTheLineEmbedded: an embedded node takes an early crowd into a queue line, starts
// draining it at 100 tickets a second, and is killed with SIGKILL half-way, while late joiners
// are still coming. Restarted on the same files, it finishes: every acknowledged ticket is
// answered, and the winners are exactly the first ones in the draw's order.
func TestKillNineTheLineEmbedded(t *testing.T) {
	const stock = 200
	env := testEnv(sqliteDSN(t))
	first := e2etest.StartChild(t, env)
	c := newClient(t, first.Base)
	start := time.Now().Add(4 * time.Second).Truncate(time.Second)
	id := createLined(c, "queue", stock, 100, start)
	early, _ := joins(c, id, names("e", 3*stock), 32, nil)
	if len(early) != 3*stock || !time.Now().Before(start) {
		t.Fatalf("%d early joins acknowledged by %v (start %v)", len(early), time.Now(), start)
	}
	time.Sleep(time.Until(start))
	var killed atomic.Bool
	_, late := joins(c, id, names("l", 3*stock), 4, func() bool {
		if killed.Load() {
			return true
		}
		if n := lineStats(c, id)["answered"].(float64); n >= 30 {
			first.Kill()
			killed.Store(true)
		}
		return killed.Load()
	})
	if !killed.Load() {
		t.Fatal("the late crowd ended before the kill")
	}
	t.Logf("killed with %d early and %d late tickets acknowledged", len(early), len(late))
	c = newClient(t, e2etest.StartChild(t, env).Base)
	checkLine(c, id, stock, early, late, "SOLD_OUT")
}

// TestKillNineTheDrainerOnRedis: an API node takes an early crowd into a queue line on Redis and
// is killed with SIGKILL under the crowd; a worker node starts draining at 100 tickets a second
// and is killed mid-way. A second worker takes the line over once the first one's lease has run
// out: every acknowledged ticket is answered, and the winners are exactly the draw's first ones.
func TestKillNineTheDrainerOnRedis(t *testing.T) {
	t.Parallel() // mostly waits (leases, timers, processes): overlapped with the suite's other waits
	const stock = 300
	dsn, srv := dbtest.MySQLDSN(t), redistest.Start(t, redistest.Options{})
	env := func(role string) map[string]string {
		return testEnv(dsn, "SECKILL_REDIS", srv.URL(), "SECKILL_ROLE", role)
	}
	api := e2etest.StartChild(t, env(node.RoleAPI))
	c := newClient(t, api.Base)
	start := time.Now().Add(4 * time.Second).Truncate(time.Second)
	id := createLined(c, "queue", stock, 100, start)
	var killed atomic.Bool
	var sent int
	// The crowd is meant to come before the start; on a slow machine its tail may come after,
	// and those tickets are placed on arrival: they are checked as the late ones they are.
	early, late := joins(c, id, names("u", 5*stock), 16, func() bool {
		if sent++; !killed.Load() && sent > 4*stock {
			api.Kill() // under the crowd: joins in flight are not acknowledged, the rest are kept
			killed.Store(true)
		}
		return killed.Load()
	})
	if !killed.Load() || len(early) < stock {
		t.Fatalf("%d entries acknowledged before the API node was killed (killed %v)", len(early), killed.Load())
	}
	c = newClient(t, e2etest.StartChild(t, env(node.RoleAPI)).Base)
	if status, m, _ := c.Call("POST", "/api/activities/"+id+"/grab", c.Token("u1"), ""); status != http.StatusAccepted ||
		m["status"] != "ALREADY_QUEUED" || m["queue_token"] != early["u1"] {
		t.Fatalf("u1 joined again after the restart: %d %v, want its ticket %s back", status, m, early["u1"])
	}
	time.Sleep(time.Until(start))
	worker := e2etest.StartChild(t, env(node.RoleWorker))
	deadline := time.Now().Add(30 * time.Second)
	for lineStats(c, id)["answered"] == 0.0 {
		if time.Now().After(deadline) {
			t.Fatalf("the first worker never drew: %v", lineStats(c, id))
		}
		time.Sleep(5 * time.Millisecond)
	}
	worker.Kill()
	t.Logf("killed the drainer with %v answered of %d entries (%d joins after the start)", lineStats(c, id)["answered"], len(early), len(late))
	e2etest.StartChild(t, env(node.RoleWorker))
	checkLine(c, id, stock, early, late, "SOLD_OUT")
}
