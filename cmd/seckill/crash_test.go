package main

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"seckill/internal/dbtest"
	"seckill/internal/redisstore"
	"seckill/internal/redistest"

	"seckill/internal/node"

	"seckill/internal/e2etest"
)

// TestKillNineMidSale kills the server with SIGKILL while a crowd is grabbing, restarts it on the
// same database, and checks that every grab acknowledged before the kill became an order, that
// the buyers are remembered, and that the rest of the stock (not more) is sold afterwards.
func TestKillNineMidSale(t *testing.T) {
	const stock = 300
	env := testEnv(sqliteDSN(t))
	first := e2etest.StartChild(t, env)
	c := newClient(t, first.Base)
	id := c.CreateItem(stock, 1, 15*time.Minute)

	users := make([]string, 3000)
	for i := range users {
		users[i] = fmt.Sprint("before-", i)
	}
	var acked atomic.Int64
	var killed atomic.Bool
	var mu sync.Mutex
	stopCrowd := func() bool {
		mu.Lock()
		defer mu.Unlock()
		if !killed.Load() && acked.Load() >= 100 {
			first.Kill()
			killed.Store(true)
		}
		return killed.Load()
	}
	// Count acknowledgements as they arrive so that the kill lands in the middle of the sale.
	count := func(o outcome) {
		if o.Status == http.StatusAccepted {
			acked.Add(1)
		}
	}
	outs := c.Crowd(id, users, 0, 32, count, stopCrowd)
	if !killed.Load() {
		t.Fatalf("the sale ended (%d acknowledged) before the kill", acked.Load())
	}
	wins := map[string]string{}
	for _, o := range outs {
		if o.Status == http.StatusAccepted {
			wins[o.User] = o.Token
		}
	}
	t.Logf("killed with %d grabs acknowledged of %d answered clicks", len(wins), len(outs))

	second := e2etest.StartChild(t, env)
	c = newClient(t, second.Base)
	st := c.Drained(id)
	if got := st["orders"].(float64); got < float64(len(wins)) || got > stock {
		t.Fatalf("after restart %v orders; %d were acknowledged, stock %d", got, len(wins), stock)
	}
	if st["failed"] != 0.0 {
		t.Fatalf("the database refused grabs after the restart: %v", st)
	}
	for user, token := range wins {
		o := c.Must("GET", "/api/orders/"+token, c.Token(user), "", http.StatusOK)
		if o["status"] != "CREATED" {
			t.Fatalf("acknowledged grab %s of %s is %v after kill -9", token, user, o["status"])
		}
		if status, m, _ := c.Call("POST", "/api/activities/"+id+"/grab", c.Token(user), ""); status != http.StatusConflict {
			t.Fatalf("%s won before the kill and grabbed again after it: %d %v", user, status, m)
		}
	}

	more := make([]string, 2000)
	for i := range more {
		more[i] = fmt.Sprint("after-", i)
	}
	for _, o := range c.Crowd(id, more, 1, 32, nil, nil) {
		if o.Err != nil || (o.Status != http.StatusAccepted && o.Status != http.StatusConflict && o.Status != http.StatusGone) {
			t.Fatalf("grab after restart: %d %s %v", o.Status, o.Code, o.Err)
		}
	}
	st = c.Drained(id)
	if st["created"] != float64(stock) || st["orders"] != float64(stock) || st["remaining"] != 0.0 {
		t.Fatalf("after the sale: %v; want exactly %d orders, none failed, nothing left", st, stock)
	}
}

// TestKillNineWorkerMidDrain: an API node (SECKILL_ROLE=api, no worker) takes 10,000 grabs into
// the Redis stream; a worker node starts draining them into MariaDB and is killed with SIGKILL
// while it holds delivered, unacknowledged entries. A second worker node takes those over
// (XAUTOCLAIM once SECKILL_CLAIM_IDLE has passed) and finishes: every acknowledged grab ends as
// exactly one order.
func TestKillNineWorkerMidDrain(t *testing.T) {
	const users = 10_000
	dsn, srv := dbtest.MySQLDSN(t), redistest.Start(t, redistest.Options{})
	env := func(role string) map[string]string {
		return testEnv(dsn, "SECKILL_REDIS", srv.URL(), "SECKILL_ROLE", role, "SECKILL_CLAIM_IDLE", "2s")
	}
	api := newClient(t, e2etest.StartChild(t, env(node.RoleAPI)).Base)
	id := api.CreateItem(users, 1, 15*time.Minute)
	names := make([]string, users)
	for i := range names {
		names[i] = fmt.Sprint("u", i)
	}
	wins := map[string]string{}
	for _, o := range api.Crowd(id, names, 0, 32, nil, nil) {
		if o.Err != nil || o.Status != http.StatusAccepted {
			t.Fatalf("grab by %s: %d %s %v", o.User, o.Status, o.Code, o.Err)
		}
		wins[o.User] = o.Token
	}
	if st := api.Stats(id); st["pending_queue"] != float64(users) || st["orders"] != 0.0 {
		t.Fatalf("an API node placed orders or lost grabs: %v", st)
	}

	rdb, err := redisstore.Dial(t.Context(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	first := e2etest.StartChild(t, env(node.RoleWorker))
	var held int64 // entries delivered to the first worker and not acknowledged when it died
	deadline := time.Now().Add(30 * time.Second)
	for held == 0 {
		if time.Now().After(deadline) {
			t.Fatal("never caught the first worker holding unacknowledged grabs")
		}
		time.Sleep(5 * time.Millisecond)
		if api.Stats(id)["orders"] == 0.0 {
			continue
		}
		// Freeze it to look at what it holds; let it go on if it was between two batches.
		if err := first.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		p, err := rdb.XPending(t.Context(), redisstore.StreamKey(id), redisstore.Group).Result()
		if err != nil {
			t.Fatal(err)
		}
		if held = p.Count; held == 0 {
			first.Signal(syscall.SIGCONT)
		}
	}
	first.Kill()
	st := api.Stats(id)
	t.Logf("killed the first worker holding %d grabs; %v orders placed", held, st["orders"])
	if st["orders"] == float64(users) {
		t.Fatal("the first worker placed every order before it died: nothing left to take over")
	}

	e2etest.StartChild(t, env(node.RoleWorker))
	st = api.Drained(id)
	if st["orders"] != float64(users) || st["created"] != float64(users) || st["failed"] != 0.0 || st["remaining"] != 0.0 {
		t.Fatalf("after the takeover: %v; want exactly %d orders, all created", st, users)
	}
	for user, token := range wins {
		if o := api.Must("GET", "/api/orders/"+token, api.Token(user), "", http.StatusOK); o["status"] != "CREATED" {
			t.Fatalf("acknowledged grab %s of %s is %v", token, user, o["status"])
		}
	}
}
