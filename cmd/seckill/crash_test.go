package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"seckill/internal/dbtest"
	"seckill/internal/redisgate"
	"seckill/internal/redistest"

	"seckill/internal/testtier"

	"seckill/internal/node"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// buildBinary compiles the program once per test run, as the crash tests need a real process to
// kill.
func buildBinary(t *testing.T) string {
	t.Helper()
	testtier.NeedsServer(t, "the built seckill binary")
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "seckill-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "seckill")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// child is a seckill process started from the built binary.
type child struct {
	cmd  *exec.Cmd
	base string
}

// startChild starts the built binary with env, and nothing else, as its environment (see
// testEnv).
func startChild(t *testing.T, env map[string]string) *child {
	t.Helper()
	cmd := exec.Command(buildBinary(t), "serve")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd}
	t.Cleanup(func() { c.kill() })
	c.base = waitListening(t, stdout)
	return c
}

func (c *child) kill() {
	if c.cmd.ProcessState == nil {
		c.cmd.Process.Kill() // SIGKILL: no shutdown, no flush
		c.cmd.Wait()
	}
}

// TestKillNineMidSale kills the server with SIGKILL while a crowd is grabbing, restarts it on the
// same database, and checks that every grab acknowledged before the kill became an order, that
// the buyers are remembered, and that the rest of the stock (not more) is sold afterwards.
func TestKillNineMidSale(t *testing.T) {
	const stock = 300
	env := testEnv(sqliteDSN(t))
	first := startChild(t, env)
	c := newClient(t, first.base)
	id := c.createItem(stock, 1, 15*time.Minute)

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
			first.kill()
			killed.Store(true)
		}
		return killed.Load()
	}
	// Count acknowledgements as they arrive so that the kill lands in the middle of the sale.
	count := func(o outcome) {
		if o.status == http.StatusAccepted {
			acked.Add(1)
		}
	}
	outs := c.crowd(id, users, 0, 32, count, stopCrowd)
	if !killed.Load() {
		t.Fatalf("the sale ended (%d acknowledged) before the kill", acked.Load())
	}
	wins := map[string]string{}
	for _, o := range outs {
		if o.status == http.StatusAccepted {
			wins[o.user] = o.token
		}
	}
	t.Logf("killed with %d grabs acknowledged of %d answered clicks", len(wins), len(outs))

	second := startChild(t, env)
	c = newClient(t, second.base)
	st := c.drained(id)
	if got := st["orders"].(float64); got < float64(len(wins)) || got > stock {
		t.Fatalf("after restart %v orders; %d were acknowledged, stock %d", got, len(wins), stock)
	}
	if st["failed"] != 0.0 {
		t.Fatalf("the database refused grabs after the restart: %v", st)
	}
	for user, token := range wins {
		o := c.must("GET", "/api/orders/"+token, c.token(user), "", http.StatusOK)
		if o["status"] != "CREATED" {
			t.Fatalf("acknowledged grab %s of %s is %v after kill -9", token, user, o["status"])
		}
		if status, m, _ := c.call("POST", "/api/activities/"+id+"/grab", c.token(user), ""); status != http.StatusConflict {
			t.Fatalf("%s won before the kill and grabbed again after it: %d %v", user, status, m)
		}
	}

	more := make([]string, 2000)
	for i := range more {
		more[i] = fmt.Sprint("after-", i)
	}
	for _, o := range c.crowd(id, more, 1, 32, nil, nil) {
		if o.err != nil || (o.status != http.StatusAccepted && o.status != http.StatusConflict && o.status != http.StatusGone) {
			t.Fatalf("grab after restart: %d %s %v", o.status, o.code, o.err)
		}
	}
	st = c.drained(id)
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
	api := newClient(t, startChild(t, env(node.RoleAPI)).base)
	id := api.createItem(users, 1, 15*time.Minute)
	names := make([]string, users)
	for i := range names {
		names[i] = fmt.Sprint("u", i)
	}
	wins := map[string]string{}
	for _, o := range api.crowd(id, names, 0, 32, nil, nil) {
		if o.err != nil || o.status != http.StatusAccepted {
			t.Fatalf("grab by %s: %d %s %v", o.user, o.status, o.code, o.err)
		}
		wins[o.user] = o.token
	}
	if st := api.stats(id); st["pending_queue"] != float64(users) || st["orders"] != 0.0 {
		t.Fatalf("an API node placed orders or lost grabs: %v", st)
	}

	rdb, err := redisgate.Dial(t.Context(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	first := startChild(t, env(node.RoleWorker))
	var held int64 // entries delivered to the first worker and not acknowledged when it died
	deadline := time.Now().Add(30 * time.Second)
	for held == 0 {
		if time.Now().After(deadline) {
			t.Fatal("never caught the first worker holding unacknowledged grabs")
		}
		time.Sleep(5 * time.Millisecond)
		if api.stats(id)["orders"] == 0.0 {
			continue
		}
		// Freeze it to look at what it holds; let it go on if it was between two batches.
		if err := first.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		p, err := rdb.XPending(t.Context(), redisgate.StreamKey(id), redisgate.Group).Result()
		if err != nil {
			t.Fatal(err)
		}
		if held = p.Count; held == 0 {
			first.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	first.kill()
	st := api.stats(id)
	t.Logf("killed the first worker holding %d grabs; %v orders placed", held, st["orders"])
	if st["orders"] == float64(users) {
		t.Fatal("the first worker placed every order before it died: nothing left to take over")
	}

	startChild(t, env(node.RoleWorker))
	st = api.drained(id)
	if st["orders"] != float64(users) || st["created"] != float64(users) || st["failed"] != 0.0 || st["remaining"] != 0.0 {
		t.Fatalf("after the takeover: %v; want exactly %d orders, all created", st, users)
	}
	for user, token := range wins {
		if o := api.must("GET", "/api/orders/"+token, api.token(user), "", http.StatusOK); o["status"] != "CREATED" {
			t.Fatalf("acknowledged grab %s of %s is %v", token, user, o["status"])
		}
	}
}
