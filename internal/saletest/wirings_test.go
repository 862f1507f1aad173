package saletest_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/dbtest"
	"seckill/internal/redisstore"
	"seckill/internal/redistest"
	"seckill/internal/sale"
	"seckill/internal/saletest"
	"seckill/internal/sqlstore"
	"seckill/internal/worker"

	"seckill/internal/node/nodetest"
)

// raceChecks, when set, lowers rapid's number of checks (see race_test.go).
var raceChecks string

func TestMain(m *testing.M) {
	flag.Parse()
	if raceChecks != "" && !flagSet("rapid.checks") {
		flag.Set("rapid.checks", raceChecks)
	}
	code := m.Run()
	dbtest.StopAll()
	os.Exit(code)
}

func flagSet(name string) (set bool) {
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func TestEmbeddedProperty(t *testing.T) {
	saletest.Property(t, nodetest.Embedded)
}

// The embedded gate on a server database (one node, no Redis): the store and its queue table on
// MariaDB, then on PostgreSQL, each started by its harness.
func TestEmbeddedPropertyOnMariaDB(t *testing.T) {
	saletest.Property(t, func(t testing.TB, c *saletest.Clock) saletest.Env {
		return nodetest.EmbeddedOn(t, c, dbtest.MySQLDSN(t))
	})
}

// The distributed mode's node: Redis gate and streams, store on MariaDB or PostgreSQL; and the
// Redis gate on a three-master cluster.
func TestDistributedPropertyMariaDB(t *testing.T) {
	saletest.Property(t, func(t testing.TB, c *saletest.Clock) saletest.Env {
		return nodetest.Distributed(t, c, redistest.Start(t, redistest.Options{}).URL(), dbtest.MySQLDSN(t))
	})
}

func TestDistributedPropertyPostgres(t *testing.T) {
	saletest.Property(t, func(t testing.TB, c *saletest.Clock) saletest.Env {
		return nodetest.Distributed(t, c, redistest.Start(t, redistest.Options{}).URL(), dbtest.PostgresDSN(t))
	})
}

func TestDistributedPropertyCluster(t *testing.T) {
	saletest.Property(t, func(t testing.TB, c *saletest.Clock) saletest.Env {
		return nodetest.Distributed(t, c, redistest.StartCluster(t).Seeds(), dbtest.MySQLDSN(t))
	})
}

func TestEmbeddedPropertyOnPostgres(t *testing.T) {
	saletest.Property(t, func(t testing.TB, c *saletest.Clock) saletest.Env {
		return nodetest.EmbeddedOn(t, c, dbtest.PostgresDSN(t))
	})
}

// TestConcurrentSweepersRestockOnce races four sweepers and a payer per order over expired and
// almost-expired orders: every order ends paid or cancelled, never both, and the gate gets back
// exactly one unit per cancelled order.
func TestConcurrentSweepersRestockOnce(t *testing.T) {
	t.Run("embedded", func(t *testing.T) { concurrentSweepers(t, nodetest.Embedded) })
	// Two nodes on one Redis and one PostgreSQL: the sweepers of both race.
	t.Run("two redis nodes", func(t *testing.T) {
		srv, dsn := redistest.Start(t, redistest.Options{}), dbtest.PostgresDSN(t)
		node := func(t testing.TB, c *saletest.Clock) saletest.Env { return nodetest.Distributed(t, c, srv.URL(), dsn) }
		concurrentSweepers(t, node, node)
	})
}

// concurrentSweepers races four sweepers (spread over the nodes newEnvs build, sharing one
// clock) and a payer per order.
func concurrentSweepers(t *testing.T, newEnvs ...saletest.NewEnv) {
	ctx := context.Background()
	start := saletest.T0
	clock := saletest.NewClock(start)
	var nodes []saletest.Env
	for _, newEnv := range newEnvs {
		nodes = append(nodes, newEnv(t, clock))
	}
	env := nodes[0]
	const stock = 40
	a := createItem(t, env.Service, clock, "", stock, time.Minute)
	tokens := sellOut(t, env, a)
	clock.Advance(time.Minute - time.Millisecond) // the payers race the window's last millisecond
	var wg sync.WaitGroup
	var paid sync.Map
	for i := range 4 {
		wg.Go(func() {
			clock.Advance(time.Millisecond)
			if _, err := nodes[i%len(nodes)].Service.SweepExpired(ctx, 7); err != nil {
				t.Errorf("sweep: %v", err)
			}
		})
	}
	for tok, user := range tokens {
		wg.Go(func() {
			if o, err := env.Service.Pay(ctx, user, tok); err == nil && o.Status == sale.StatusPaid {
				paid.Store(tok, true)
			} else if err != nil && !errors.Is(err, sale.ErrInvalidState) {
				t.Errorf("pay: %v", err)
			}
		})
	}
	wg.Wait()
	clock.Advance(time.Minute)
	sweepAll(t, env)
	nPaid := 0
	for tok, user := range tokens {
		o, err := env.Service.Order(ctx, user, tok)
		if err != nil {
			t.Fatal(err)
		}
		_, wasPaid := paid.Load(tok)
		switch {
		case wasPaid && o.Status != sale.StatusPaid:
			t.Errorf("order %s was paid and is now %s", tok, o.Status)
		case !wasPaid && o.Status != sale.StatusCancelled:
			t.Errorf("order %s unpaid is %s, want CANCELLED", tok, o.Status)
		}
		if wasPaid {
			nPaid++
		}
	}
	rem, err := env.Service.Remaining(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rem != int64(stock-nPaid) {
		t.Fatalf("gate has %d remaining after %d of %d orders were paid; want %d (one unit back per cancel)", rem, nPaid, stock, stock-nPaid)
	}
	if rec, err := env.Service.Reconcile(ctx, a.ID); err != nil || !rec.OK {
		t.Fatalf("reconcile = %+v, %v", rec, err)
	}
}

// TestRedisDataLossRebuildsTheGate empties Redis (a restart without AOF) in the middle of a sale:
// the next grab rebuilds the activity from the database, the units already sold stay sold, and the
// rest sells exactly once.
func TestRedisDataLossRebuildsTheGate(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	clock := saletest.NewClock(saletest.T0)
	env := nodetest.Distributed(t, clock, srv.URL(), dbtest.MySQLDSN(t))
	const stock = 10
	a := createItem(t, env.Service, clock, "", stock, time.Minute)
	won := 0
	grab := func(user string) {
		t.Helper()
		_, err := env.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: user})
		switch {
		case err == nil:
			won++
		case errors.Is(err, sale.ErrSoldOut), errors.Is(err, sale.ErrAlreadyBought):
		default:
			t.Fatalf("grab by %s: %v", user, err)
		}
	}
	for u := range 6 {
		grab(fmt.Sprint("before-", u))
	}
	env.Drain(a.ID)
	srv.Kill() // no AOF: Redis comes back empty
	srv.Restart(t)
	for u := range 6 {
		grab(fmt.Sprint("before-", u)) // the buyers are remembered: each is refused
	}
	for u := range 20 {
		grab(fmt.Sprint("after-", u))
	}
	env.Drain(a.ID)
	c, err := env.Store.Counts(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if won != stock || c.Created != stock || c.Failed != 0 {
		t.Fatalf("%d grabs won, database %+v; want exactly %d, none refused by the database", won, c, stock)
	}
}

// TestRedisKillNineWithAOFAlways kills Redis (appendfsync always) with SIGKILL while a crowd is
// grabbing, restarts it, and sells on: every grab acknowledged before the kill becomes exactly one
// order, and exactly the stock is sold.
func TestRedisKillNineWithAOFAlways(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{AOF: true, Fsync: "always"})
	clock := saletest.NewClock(saletest.T0)
	env := nodetest.Distributed(t, clock, srv.URL(), dbtest.MySQLDSN(t))
	const stock = 300
	a := createItem(t, env.Service, clock, "", stock, time.Minute)
	var mu sync.Mutex
	acked := map[string]string{} // token -> user
	var killOnce sync.Once
	crowd := func(prefix string, users int, killAt int) {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 32)
		for u := range users {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				user := fmt.Sprint(prefix, u)
				var g sale.Grab
				var err error
				if killAt > 0 {
					g, err = env.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: user})
				} else {
					g, err = grab(env, a.ID, user) // after the restart: BUSY until the node's breaker closes, and a client retries
				}
				switch {
				case err == nil:
					mu.Lock()
					acked[g.Token] = user
					n := len(acked)
					mu.Unlock()
					if killAt > 0 && n >= killAt {
						killOnce.Do(srv.Kill)
					}
				case errors.Is(err, sale.ErrSoldOut), errors.Is(err, sale.ErrBusy):
				default:
					t.Errorf("grab by %s: %v", user, err)
				}
			})
		}
		wg.Wait()
	}
	crowd("before-", 1000, 100)
	mu.Lock()
	before := len(acked)
	mu.Unlock()
	srv.Restart(t)
	crowd("after-", 1000, 0)
	env.Drain(a.ID)
	for tok, user := range acked {
		o, err := env.Service.Order(ctx, user, tok)
		if err != nil || o.Status != sale.StatusCreated {
			t.Fatalf("acknowledged grab %s of %s: %+v, %v", tok, user, o, err)
		}
	}
	c, err := env.Store.Counts(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	// A grab Redis ran just before the kill may have lost its reply: its buyer saw BUSY (and
	// would find the order with an idempotency key), so orders may outnumber acknowledgements,
	// never the stock.
	if c.Orders != stock || c.Created != stock || len(acked) > stock {
		t.Fatalf("%d acknowledged (%d before the kill), database %+v; want exactly %d orders", len(acked), before, c, stock)
	}
	t.Logf("%d grabs acknowledged before the kill, %d in all, %d orders", before, len(acked), c.Orders)
}

// TestDatabaseOutage stops MariaDB (SIGKILL) for 30 seconds while grabs go on: they are still
// acknowledged (Redis decides them), the worker retries, and once the database is back the backlog
// drains into exactly one order per grab.
func TestDatabaseOutage(t *testing.T) {
	ctx := context.Background()
	clock := saletest.NewClock(saletest.T0)
	env := nodetest.Distributed(t, clock, redistest.Start(t, redistest.Options{}).URL(), dbtest.MySQLDSN(t))
	a := createItem(t, env.Service, clock, "", 1000, time.Hour)
	acked := map[string]string{}
	grab := func(user string) {
		t.Helper()
		g, err := env.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: user})
		if err != nil {
			t.Fatalf("grab by %s: %v", user, err)
		}
		acked[g.Token] = user
	}
	for u := range 50 {
		grab(fmt.Sprint("before-", u))
	}
	env.Drain(a.ID)

	db := dbtest.MariaDB(t)
	db.Kill()
	down := time.Now()
	for u := 0; time.Since(down) < 30*time.Second; u++ {
		grab(fmt.Sprint("during-", u)) // fails the test if a grab is refused
		time.Sleep(100 * time.Millisecond)
	}
	backlog, err := env.Queue.Depth(ctx, a)
	if err != nil || backlog == 0 {
		t.Fatalf("backlog after 30 s without a database = %d, %v; want grabs waiting", backlog, err)
	}
	db.Restart(t)
	env.Drain(a.ID)
	for tok, user := range acked {
		if o, err := env.Service.Order(ctx, user, tok); err != nil || o.Status != sale.StatusCreated {
			t.Fatalf("grab %s of %s after the outage: %+v, %v", tok, user, o, err)
		}
	}
	c, err := env.Store.Counts(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Orders != int64(len(acked)) || c.Created != c.Orders {
		t.Fatalf("database %+v after the outage; %d grabs were acknowledged (%d queued during it)", c, len(acked), backlog)
	}
	t.Logf("%d grabs acknowledged, %d of them queued while the database was down", len(acked), backlog)
}

// TestDeadWorkerEntriesAreRedelivered: a worker takes grabs from the stream, places some of them
// and dies before acknowledging any (kill -9). Another node's worker claims them once they have
// been idle long enough, and each grab ends as exactly one order.
func TestDeadWorkerEntriesAreRedelivered(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	dsn := dbtest.MySQLDSN(t)
	store, err := sqlstore.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rdb, err := redisstore.Dial(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	clock := saletest.NewClock(saletest.T0)
	ids := func(ctx context.Context) ([]sale.Activity, error) { return store.Activities(ctx, time.Time{}) }
	doomed := nodetest.Idle(t, clock, srv.URL(), dsn)
	svc, dead := doomed.Service, doomed.Queue // its worker is the one that dies
	const n = 40
	a := createItem(t, svc, clock, "dead", n, time.Hour)
	for u := range n {
		if _, err := svc.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: fmt.Sprint("u", u)}); err != nil {
			t.Fatal(err)
		}
	}
	taken, err := dead.Receive(ctx, n)
	if err != nil || len(taken) != n {
		t.Fatalf("the doomed worker received %d, %v; want %d", len(taken), err, n)
	}
	half := make([]sale.Grab, 0, n/2)
	for _, d := range taken[:n/2] {
		half = append(half, d.Grab)
	}
	if _, err := store.PlaceOrders(ctx, half); err != nil { // placed, never acknowledged
		t.Fatal(err)
	}

	live := redisstore.NewQueue(rdb, "live", ids, 2*time.Millisecond, 300*time.Millisecond)
	run, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { (&worker.Worker{Queue: live, Store: store, Log: slog.New(slog.DiscardHandler)}).Run(run) })
	defer func() { stop(); wg.Wait() }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		depth, err := live.Depth(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		if depth == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d grabs still in the stream 15 s after their worker died", depth)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c, err := store.Counts(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Orders != n || c.Created != n {
		t.Fatalf("database %+v; want exactly %d orders, one per grab", c, n)
	}
}

// TestReconcileRepairsRedisDrift corrupts the Redis stock count both ways (units invented, units
// lost) and checks that reconcile reports the drift, repairs it from the database and the stream,
// and that exactly the stock is then sold.
func TestReconcileRepairsRedisDrift(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	clock := saletest.NewClock(saletest.T0)
	env := nodetest.Distributed(t, clock, srv.URL(), dbtest.PostgresDSN(t))
	const stock = 10
	a := createItem(t, env.Service, clock, "", stock, time.Hour)
	for u := range 3 {
		if _, err := env.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: fmt.Sprint("u", u)}); err != nil {
			t.Fatal(err)
		}
	}
	env.Drain(a.ID)
	rdb, err := redisstore.Dial(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	for _, lie := range []int64{9, 5} { // 2 units invented, then 2 lost
		if err := rdb.Set(ctx, "{act:"+a.ID+"}:stock", lie, 0).Err(); err != nil {
			t.Fatal(err)
		}
		rec, err := env.Service.Reconcile(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if rec.OK || rec.Drift != lie-7 || !rec.Repaired {
			t.Fatalf("reconcile with redis saying %d: %+v; want drift %d repaired", lie, rec, lie-7)
		}
		if rem, _ := env.Service.Remaining(ctx, a.ID); rem != 7 {
			t.Fatalf("remaining after repair = %d, want 7", rem)
		}
	}
	won := 0
	for u := 3; u < 30; u++ {
		if _, err := env.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: fmt.Sprint("u", u)}); err == nil {
			won++
		} else if !errors.Is(err, sale.ErrSoldOut) {
			t.Fatal(err)
		}
	}
	env.Drain(a.ID)
	c, err := env.Store.Counts(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if won != 7 || c.Created != stock || c.Failed != 0 {
		t.Fatalf("after repair %d more won, database %+v; want 7 more and %d orders", won, c, stock)
	}
}

// TestPoisonGrabGoesToTheDeadLetters: a grab whose workers keep dying before they acknowledge it
// (three consumers take it in turn and vanish) is, on its fourth delivery, recorded in the
// dead_letters table, moved to the activity's dead-letter stream, and counted in the stats.
func TestPoisonGrabGoesToTheDeadLetters(t *testing.T) {
	ctx := context.Background()
	srv, dsn := redistest.Start(t, redistest.Options{}), dbtest.MySQLDSN(t)
	store, err := sqlstore.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rdb, err := redisstore.Dial(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	clock := saletest.NewClock(saletest.T0)
	ids := func(ctx context.Context) ([]sale.Activity, error) { return store.Activities(ctx, time.Time{}) }
	consumer := func(name string) *redisstore.Queue {
		return redisstore.NewQueue(rdb, name, ids, 2*time.Millisecond, 40*time.Millisecond)
	}
	svc := nodetest.Idle(t, clock, srv.URL(), dsn).Service // the consumers below are its workers
	a := createItem(t, svc, clock, "poison", 5, time.Hour)
	g, err := svc.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"first", "second", "third"} {
		recv, cancel := context.WithTimeout(ctx, 5*time.Second)
		ds, err := consumer(name).Receive(recv, 10)
		cancel()
		if err != nil || len(ds) != 1 || ds[0].Attempts != i+1 {
			t.Fatalf("consumer %s received %+v, %v; want the grab on its delivery %d", name, ds, err, i+1)
		}
		// ... and dies without acknowledging it.
	}
	run, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		(&worker.Worker{Queue: consumer("fourth"), Store: store, Log: slog.New(slog.DiscardHandler), MaxDeliveries: 3}).Run(run)
		close(done)
	}()
	defer func() { stop(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := svc.Stats(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.DeadLetters == 1 && st.PendingQueue == 0 {
			if st.Orders != 0 {
				t.Fatalf("stats %+v: the dead letter was placed as an order", st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v after 10 s; want one dead letter and an empty stream", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	dead, err := rdb.XRange(ctx, redisstore.DeadKey(a.ID), "-", "+").Result()
	if err != nil || len(dead) != 1 || dead[0].Values["token"] != g.Token {
		t.Fatalf("dead-letter stream = %v, %v; want grab %s", dead, err, g.Token)
	}
}

// createItem creates an item activity on svc (id "" lets the service name it), one unit per user,
// on sale from the clock's now for an hour.
// sweepAll runs the sweeper until it finds no expired order left.
func sweepAll(t *testing.T, env saletest.Env) {
	t.Helper()
	for {
		n, err := env.Service.SweepExpired(context.Background(), 100)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

// sellOut sells a's whole stock, a unit to each of users u0, u1, ..., and waits for the orders:
// it returns each order's token and its buyer.
func sellOut(t *testing.T, env saletest.Env, a sale.Activity) map[string]string {
	t.Helper()
	tokens := map[string]string{}
	for u := range a.Stock {
		user := fmt.Sprint("u", u)
		g, err := env.Service.Grab(context.Background(), sale.GrabRequest{ActivityID: a.ID, UserID: user})
		if err != nil {
			t.Fatal(err)
		}
		tokens[g.Token] = user
	}
	env.Drain(a.ID)
	return tokens
}

func createItem(t *testing.T, svc *sale.Service, clock *saletest.Clock, id string, stock int64, payWindow time.Duration) sale.Activity {
	t.Helper()
	a, err := svc.CreateActivity(context.Background(), sale.Activity{ID: id, Name: "test item", Kind: sale.KindItem,
		Stock: stock, PerUserLimit: 1, StartAt: clock.Now(), EndAt: clock.Now().Add(time.Hour), PayWindow: payWindow,
		Admission: sale.AdmitDirect})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestSoldOutFlagsClearedOnRestockEverywhere: three nodes on one Redis and MariaDB all learn that
// an activity is sold out; when an order is cancelled through one of them, the others hear the
// restock over Redis pub/sub and clear their flags at once (their flags would otherwise stand for
// RestockFlagTTL), so the unit sells again through any node.
func TestSoldOutFlagsClearedOnRestockEverywhere(t *testing.T) {
	ctx := context.Background()
	srv, dsn := redistest.Start(t, redistest.Options{}), dbtest.MySQLDSN(t)
	clock := saletest.NewClock(saletest.T0)
	var nodes []saletest.Env
	for range 3 {
		nodes = append(nodes, nodetest.Distributed(t, clock, srv.URL(), dsn))
	}
	a := createItem(t, nodes[0].Service, clock, "", 1, time.Minute)
	g, err := nodes[0].Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: "first"})
	if err != nil {
		t.Fatal(err)
	}
	nodes[0].Drain(a.ID)
	for i, n := range nodes {
		if _, err := n.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: fmt.Sprint("late", i)}); !errors.Is(err, sale.ErrSoldOut) {
			t.Fatalf("node %d: %v, want sold out", i, err)
		}
		if !n.Service.SoldOut(a.ID) {
			t.Fatalf("node %d has no sold-out flag after the gate said sold out", i)
		}
	}
	if _, err := nodes[0].Service.Cancel(ctx, "first", g.Token); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second) // far inside the flags' 10 s
	for i, n := range nodes {
		for n.Service.SoldOut(a.ID) {
			if time.Now().After(deadline) {
				t.Fatalf("node %d still flags the activity sold out 2 s after the restock", i)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if _, err := nodes[2].Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: "second"}); err != nil {
		t.Fatalf("the restocked unit through another node: %v", err)
	}
	if _, err := nodes[1].Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: "third"}); !errors.Is(err, sale.ErrSoldOut) {
		t.Fatalf("after the unit sold again: %v, want sold out", err)
	}
}

// TestChallengeJourney runs the challenge and its one-time pass on the embedded wiring and on a
// Redis Cluster, where the pass must sit in its activity's slot for the grab script to spend it.
func TestChallengeJourney(t *testing.T) {
	t0 := saletest.T0
	t.Run("Embedded", func(t *testing.T) {
		saletest.ChallengeJourney(t, nodetest.Embedded(t, saletest.NewClock(t0)))
	})
	t.Run("Cluster", func(t *testing.T) {
		saletest.ChallengeJourney(t, nodetest.Distributed(t, saletest.NewClock(t0), redistest.StartCluster(t).Seeds(), dbtest.MySQLDSN(t)))
	})
}

// TestLeaderboard runs the red-packet rain and its leaderboards in process and on Redis.
func TestLeaderboard(t *testing.T) {
	t0 := saletest.T0
	t.Run("Embedded", func(t *testing.T) { saletest.LeaderboardTests(t, nodetest.Embedded(t, saletest.NewClock(t0))) })
	t.Run("Redis", func(t *testing.T) {
		saletest.LeaderboardTests(t, nodetest.Distributed(t, saletest.NewClock(t0), redistest.Start(t, redistest.Options{}).URL(), dbtest.MySQLDSN(t)))
	})
	t.Run("Cluster", func(t *testing.T) {
		saletest.LeaderboardTests(t, nodetest.Distributed(t, saletest.NewClock(t0), redistest.StartCluster(t).Seeds(), dbtest.PostgresDSN(t)))
	})
}

// TestReconcileRepairsARedPacketsLeaderboard: Redis loses a share from a red packet's list and a
// member from its leaderboard; reconcile finds the drift and reloads both from the database.
func TestReconcileRepairsARedPacketsLeaderboard(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	clock := saletest.NewClock(saletest.T0)
	env := nodetest.Distributed(t, clock, srv.URL(), dbtest.PostgresDSN(t))
	a, err := env.Service.CreateActivity(ctx, sale.Activity{Name: "rain", Kind: sale.KindRedPacket, Stock: 10,
		TotalCents: 1000, StartAt: clock.Now(), EndAt: clock.Now().Add(time.Hour), PayWindow: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for u := range 4 {
		if _, err := env.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: fmt.Sprint("u", u)}); err != nil {
			t.Fatal(err)
		}
	}
	env.Drain(a.ID)
	before, err := env.Boards.Leaderboard(ctx, a.ID, 10)
	if err != nil || len(before.Entries) != 4 {
		t.Fatalf("leaderboard: %+v, %v", before, err)
	}
	rdb, err := redisstore.Dial(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	p := "{act:" + a.ID + "}:"
	if err := rdb.RPop(ctx, p+"shares").Err(); err != nil { // a share lost
		t.Fatal(err)
	}
	if err := rdb.Decr(ctx, p+"stock").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZPopMax(ctx, p+"leaders").Err(); err != nil { // the winner lost
		t.Fatal(err)
	}
	rec, err := env.Service.Reconcile(ctx, a.ID)
	if err != nil || !rec.Repaired || rec.Drift != -1 {
		t.Fatalf("reconcile: %+v, %v; want a drift of -1 repaired", rec, err)
	}
	after, err := env.Boards.Leaderboard(ctx, a.ID, 10)
	if err != nil || fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("leaderboard after the repair: %+v, %v; want %+v", after, err, before)
	}
	if rem, _ := env.Service.Remaining(ctx, a.ID); rem != 6 {
		t.Fatalf("remaining after repair = %d, want 6", rem)
	}
}

// shardedSale starts a three-master cluster and a distributed node on it and MariaDB, with an
// item of stock units split over three shards, open from the node's clock on.
func shardedSale(t *testing.T, stock int64) (*redistest.Cluster, saletest.Env, sale.Activity) {
	t.Helper()
	cluster := redistest.StartCluster(t)
	clock := saletest.NewClock(saletest.T0)
	env := nodetest.Distributed(t, clock, cluster.Seeds(), dbtest.MySQLDSN(t))
	a, err := env.Service.CreateActivity(context.Background(), sale.Activity{Name: "hot", Kind: sale.KindItem, Stock: stock,
		PerUserLimit: 1, StartAt: clock.Now(), EndAt: clock.Now().Add(time.Hour), PayWindow: time.Hour,
		Admission: sale.AdmitDirect, StockShards: 3})
	if err != nil {
		t.Fatal(err)
	}
	return cluster, env, a
}

// TestShardedStockThroughTheService: a hot item's stock split over three slots of a real
// three-master Redis Cluster, sold through the service and the worker into MariaDB: a crowd buys
// exactly the stock, reconcile sees no drift and repairs one made on a shard, a cancelled unit
// sells again from whatever shard it went back to, and after the cluster loses everything the
// gate is rebuilt from the database with every buyer remembered.
func TestShardedStockThroughTheService(t *testing.T) {
	ctx := context.Background()
	const stock = 30
	cluster, env, a := shardedSale(t, stock)
	var mu sync.Mutex
	won := map[string]sale.Grab{}
	var wg sync.WaitGroup
	for u := range 100 {
		for range 2 {
			wg.Go(func() {
				user := fmt.Sprint("u", u)
				g, err := env.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: user, IdempotencyKey: "k"})
				switch {
				case err == nil:
					mu.Lock()
					won[user] = g
					mu.Unlock()
				case errors.Is(err, sale.ErrSoldOut), errors.Is(err, sale.ErrBusy):
				default:
					t.Errorf("grab by %s: %v", user, err)
				}
			})
		}
	}
	wg.Wait()
	env.Drain(a.ID)
	c, err := env.Store.Counts(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(won) != stock || c.Created != stock || c.Failed != 0 {
		t.Fatalf("%d winners, database %+v; want exactly %d orders", len(won), c, stock)
	}
	if rec, err := env.Service.Reconcile(ctx, a.ID); err != nil || !rec.OK {
		t.Fatalf("reconcile after the crowd: %+v, %v; want no drift", rec, err)
	}

	rdb, err := redisstore.Dial(ctx, cluster.Seeds())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if err := rdb.Set(ctx, "{act:"+redisstore.ShardID(a.ID, 2)+"}:stock", 2, 0).Err(); err != nil {
		t.Fatal(err) // two units invented on shard 2
	}
	if rec, err := env.Service.Reconcile(ctx, a.ID); err != nil || rec.OK || rec.Drift != 2 || !rec.Repaired {
		t.Fatalf("reconcile of a shard's drift: %+v, %v; want drift 2 repaired", rec, err)
	}
	if rem, err := env.Service.Remaining(ctx, a.ID); err != nil || rem != 0 {
		t.Fatalf("remaining after the repair = %d, %v", rem, err)
	}
	// The two units were taken from where they were, not charged to shard 0 as a debt: a shard
	// below zero would swallow the next unit given back to it.
	for i := range int64(3) {
		if n, err := rdb.Get(ctx, "{act:"+redisstore.ShardID(a.ID, i)+"}:stock").Int64(); err != nil || n != 0 {
			t.Fatalf("shard %d holds %d units after the repair (%v), want 0", i, n, err)
		}
	}

	// A buyer cancels: the unit goes back to the shard it came from and sells again.
	var buyer string
	for u := range won {
		buyer = u
		break
	}
	if _, err := env.Service.Cancel(ctx, buyer, won[buyer].Token); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: "late"}); err != nil {
		t.Fatalf("the restocked unit: %v", err)
	}
	env.Drain(a.ID)

	// The cluster loses everything: the next grab rebuilds the gate from the database.
	if err := rdb.(*redis.ClusterClient).ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.FlushAll(ctx).Err()
	}); err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"late", "u-new"} {
		if _, err := env.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: user}); !errors.Is(err, sale.ErrAlreadyBought) &&
			!errors.Is(err, sale.ErrSoldOut) {
			t.Fatalf("grab by %s after the cluster lost its data: %v; want refused", user, err)
		}
	}
	if rem, err := env.Service.Remaining(ctx, a.ID); err != nil || rem != 0 {
		t.Fatalf("remaining after the rebuild = %d, %v", rem, err)
	}
	c, err = env.Store.Counts(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Created != stock || c.Cancelled != 1 || c.Failed != 0 {
		t.Fatalf("database %+v; want %d created, 1 cancelled", c, stock)
	}
}

// TestEmbeddedAdmission runs the queue and lottery modes on the embedded wiring.
func TestEmbeddedAdmission(t *testing.T) { saletest.AdmissionTests(t, nodetest.Embedded) }

// TestEmbeddedAdmissionOnServerDatabases runs them with the line's journal on MariaDB and on
// PostgreSQL.
func TestEmbeddedAdmissionOnServerDatabases(t *testing.T) {
	t.Run("MariaDB", func(t *testing.T) {
		saletest.AdmissionTests(t, func(t testing.TB, c *saletest.Clock) saletest.Env {
			return nodetest.EmbeddedOn(t, c, dbtest.MySQLDSN(t))
		})
	})
	t.Run("PostgreSQL", func(t *testing.T) {
		saletest.AdmissionTests(t, func(t testing.TB, c *saletest.Clock) saletest.Env {
			return nodetest.EmbeddedOn(t, c, dbtest.PostgresDSN(t))
		})
	})
}

// TestDistributedAdmission runs the queue and lottery modes with the line on Redis, one server and
// a three-master cluster.
func TestDistributedAdmission(t *testing.T) {
	t.Run("single", func(t *testing.T) {
		saletest.AdmissionTests(t, func(t testing.TB, c *saletest.Clock) saletest.Env {
			return nodetest.Distributed(t, c, redistest.Start(t, redistest.Options{}).URL(), dbtest.MySQLDSN(t))
		})
	})
	t.Run("cluster", func(t *testing.T) {
		saletest.AdmissionTests(t, func(t testing.TB, c *saletest.Clock) saletest.Env {
			return nodetest.Distributed(t, c, redistest.StartCluster(t).Seeds(), dbtest.PostgresDSN(t))
		})
	})
}

// TestLostShardIsRebuilt: a sharded stock on a real Redis Cluster loses one shard's keys (its
// master failed over to an empty replica). The grabs of the users whose home it is are answered
// again (the shard is rebuilt with their holdings and none of its units), a reconcile at rest
// gives the lost units back, and the whole stock then sells exactly once.
func TestLostShardIsRebuilt(t *testing.T) {
	ctx := context.Background()
	const stock = 30
	cluster, env, a := shardedSale(t, stock)
	sold := 0
	grab := func(user string) error {
		t.Helper()
		_, err := env.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: user})
		if err == nil {
			sold++
		}
		return err
	}
	for u := range 9 {
		if err := grab(fmt.Sprint("before-", u)); err != nil {
			t.Fatal(err)
		}
	}
	env.Drain(a.ID)

	rdb, err := redisstore.Dial(ctx, cluster.Seeds())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	prefix := "{act:" + redisstore.ShardID(a.ID, 1) + "}:"
	for _, k := range []string{"stock", "shares", "held", "answers", "grabs", "stream", "pending", "away"} {
		if err := rdb.Del(ctx, prefix+k).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// A user at home on the lost shard is answered, and one who bought there may not buy again.
	for u := 0; ; u++ {
		user := fmt.Sprint("after-", u)
		err := grab(user)
		if err != nil {
			t.Fatalf("a grab after shard 1 was lost: %v", err)
		}
		if n, _ := rdb.HLen(ctx, prefix+"held").Result(); n > 0 {
			break // a user of shard 1 has grabbed: its holdings are back
		}
		if u > 50 {
			t.Fatal("no user homed on shard 1 among 50")
		}
	}
	env.Drain(a.ID)
	rec, err := env.Service.Reconcile(ctx, a.ID)
	if err != nil || !rec.Repaired || rec.Drift >= 0 {
		t.Fatalf("reconcile after the loss: %+v, %v; want the lost units found missing and given back", rec, err)
	}
	for u := 0; sold < stock && u < 1000; u++ {
		if err := grab(fmt.Sprint("rest-", u)); err != nil {
			t.Fatalf("grab %d of the rest: %v", sold+1, err)
		}
	}
	if err := grab("one-too-many"); !errors.Is(err, sale.ErrSoldOut) {
		t.Fatalf("a grab after the whole stock: %v, want ErrSoldOut", err)
	}
	env.Drain(a.ID)
	if c, err := env.Store.Counts(ctx, a.ID); err != nil || c.Created != stock || c.Failed != 0 {
		t.Fatalf("orders %+v, %v; want the stock sold exactly once", c, err)
	}
}

// TestArchive runs the archive's rules (saletest.Archive) on the embedded mode and on the
// distributed one, on one Redis and on a cluster.
func TestArchive(t *testing.T) {
	t.Run("Embedded", func(t *testing.T) { saletest.Archive(t, nodetest.Embedded(t, saletest.NewClock(saletest.T0))) })
	t.Run("Redis", func(t *testing.T) {
		saletest.Archive(t, nodetest.Distributed(t, saletest.NewClock(saletest.T0), redistest.Start(t, redistest.Options{}).URL(), dbtest.MySQLDSN(t)))
	})
	t.Run("Cluster", func(t *testing.T) {
		saletest.Archive(t, nodetest.Distributed(t, saletest.NewClock(saletest.T0), redistest.StartCluster(t).Seeds(), dbtest.PostgresDSN(t)))
	})
}

// TestEventPurge runs the purge of the delivered order events (saletest.EventPurge) through the
// service, on the embedded mode on SQLite and on PostgreSQL.
func TestEventPurge(t *testing.T) {
	t.Run("Embedded", func(t *testing.T) { saletest.EventPurge(t, nodetest.Embedded(t, saletest.NewClock(saletest.T0))) })
	t.Run("Postgres", func(t *testing.T) {
		saletest.EventPurge(t, nodetest.EmbeddedOn(t, saletest.NewClock(saletest.T0), dbtest.PostgresDSN(t)))
	})
}

// TestReservationWaves: a reservation sale's crowds in each wave, on every gate: embedded, a
// Redis that loses its data between two waves (killed and restarted without persistence), and a
// three-master cluster with the stock split over three slots.
func TestReservationWaves(t *testing.T) {
	t.Run("embedded", func(t *testing.T) { saletest.ReservationTests(t, nodetest.Embedded, nil) })
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t, redistest.Options{})
		saletest.ReservationTests(t, func(t testing.TB, c *saletest.Clock) saletest.Env {
			return nodetest.Distributed(t, c, srv.URL(), dbtest.MySQLDSN(t))
		}, func(t *testing.T) { srv.Kill(); srv.Restart(t) })
	})
	t.Run("cluster", func(t *testing.T) {
		saletest.ReservationTests(t, func(t testing.TB, c *saletest.Clock) saletest.Env {
			return nodetest.Distributed(t, c, redistest.StartCluster(t).Seeds(), dbtest.PostgresDSN(t))
		}, nil)
	})
}
