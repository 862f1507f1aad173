package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pressly/goose/v3"

	"seckill/internal/dbtest"
	"seckill/internal/sale"

	"seckill/internal/saletest"
)

// backends are the databases every store test and benchmark runs on, each started by its harness:
// SQLite in a temp dir, MariaDB and PostgreSQL on free loopback ports.
var backends = []struct {
	name string
	dsn  func(t testing.TB) string
}{
	{"sqlite", func(t testing.TB) string { return "sqlite:" + filepath.Join(t.TempDir(), "seckill.db") }},
	{"mariadb", dbtest.MySQLDSN},
	{"postgres", dbtest.PostgresDSN},
}

func TestMain(m *testing.M) {
	code := m.Run()
	dbtest.StopAll()
	os.Exit(code)
}

// storeTests run unchanged on every backend, each on a fresh database.
var storeTests = []struct {
	name string
	test func(t *testing.T, dsn string)
}{
	{"ActivityRoundTrip", testActivityRoundTrip},
	{"PlaceOrdersGuardsStock", testPlaceOrdersGuardsStock},
	{"PlaceOrdersGuardsPerUserLimit", testPlaceOrdersGuardsPerUserLimit},
	{"PayAndCancelTransitions", testPayAndCancelTransitions},
	{"ConcurrentCancelRestocksOnce", testConcurrentCancelRestocksOnce},
	{"CancelOwesTheRestock", testCancelOwesTheRestock},
	{"ConcurrentPlacementOfOneGrab", testConcurrentPlacementOfOneGrab},
	{"BatchPlacement", testBatchPlacement},
	{"PlacementKeepsItsStatements", testPlacementKeepsItsStatements},
	{"RedPacketShares", testRedPacketShares},
	{"Journal", testJournal},
	{"GateStateOfALongQueue", testGateStateOfALongQueue},
	{"ReopenKeepsData", testReopenKeepsData},
	{"PlacementIsWhatWasStored", testPlacementIsWhatWasStored},
	{"Blocks", testBlocks},
	{"LeaderboardQueries", testLeaderboardQueries},
	{"AuditLog", testAuditLog},
	{"OrderEvents", testOrderEvents},
	{"EventDeliveryOrder", testEventDeliveryOrder},
	{"EventPurge", testEventPurge},
	{"Payments", testPayments},
	{"PaymentsOwedBack", testPaymentsOwedBack},
	{"FailedThenSucceeded", testFailedThenSucceeded},
	{"PaymentProviders", testPaymentProviders},
	{"Reservations", testReservations},
	{"WaveReminders", testWaveReminders},
	{"Forecast", testForecast},
	{"Revisions", testRevisions},
	{"OperatorReads", testOperatorReads},
}

func TestStores(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			for _, st := range storeTests {
				t.Run(st.name, func(t *testing.T) { st.test(t, b.dsn(t)) })
			}
		})
	}
}

// TestOpenPool: a server database's pool is as big as asked (DefaultConns by Open), and a size
// out of 1 to MaxConns is refused before anything is dialled.
func TestOpenPool(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends[1:] { // SQLite: one writer and its readers, whatever is asked
		t.Run(b.name, func(t *testing.T) {
			dsn := b.dsn(t)
			for _, conns := range []int{3, DefaultConns} {
				s, err := OpenPool(ctx, dsn, conns)
				if err != nil {
					t.Fatal(err)
				}
				if got := s.w.DB.Stats().MaxOpenConnections; got != conns || s.r.DB != s.w.DB {
					t.Errorf("OpenPool(%d): a pool of %d (one pool for both: %v)", conns, got, s.r.DB == s.w.DB)
				}
				s.Close()
			}
			s := openStore(t, dsn)
			if got := s.w.DB.Stats().MaxOpenConnections; got != DefaultConns {
				t.Errorf("Open: a pool of %d, want %d", got, DefaultConns)
			}
		})
	}
	for _, conns := range []int{0, -1, MaxConns + 1} {
		if _, err := OpenPool(ctx, "postgres://nobody@127.0.0.1:1/none", conns); !errors.Is(err, sale.ErrInvalid) {
			t.Errorf("OpenPool(%d): %v, want ErrInvalid", conns, err)
		}
	}
}

func openStore(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var t0 = saletest.T0

func item(id string, stock, limit int64) sale.Activity {
	return sale.Activity{ID: id, Name: "Item " + id, Kind: sale.KindItem, Stock: stock, PriceCents: 1999,
		PerUserLimit: limit, StartAt: t0, EndAt: t0.Add(time.Hour), PayWindow: 10 * time.Minute,
		Admission: sale.AdmitDirect, StockShards: 1, CreatedAt: t0.Add(-time.Hour), Revision: 1}
}

func create(t *testing.T, s *Store, a sale.Activity, shares ...int64) {
	t.Helper()
	if err := s.CreateActivity(context.Background(), a, shares); err != nil {
		t.Fatalf("CreateActivity(%s): %v", a.ID, err)
	}
}

func grab(act, user string, n int) sale.Grab {
	return sale.Grab{Token: fmt.Sprintf("g-%s-%s-%d", act, user, n), ActivityID: act, UserID: user, AmountCents: 1999, At: t0.Add(time.Minute)}
}

func place(t *testing.T, s *Store, gs ...sale.Grab) []sale.Placement {
	t.Helper()
	ps, err := s.PlaceOrders(context.Background(), gs)
	if err != nil {
		t.Fatalf("PlaceOrders: %v", err)
	}
	return ps
}

func statuses(ps []sale.Placement) []sale.Status {
	out := make([]sale.Status, len(ps))
	for i, p := range ps {
		out[i] = p.Order.Status
	}
	return out
}

func testActivityRoundTrip(t *testing.T, dsn string) {
	s := openStore(t, dsn)
	a := item("a1", 10, 2)
	a.RequireChallenge = true
	a.Rates = sale.Rates{PerUser: 3, PerIP: sale.RateOff, Global: 0}
	a.StockShards = 3
	create(t, s, a)
	got, err := s.Activity(context.Background(), "a1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, got); diff != "" {
		t.Errorf("activity round trip (-want +got):\n%s", diff)
	}
	if err := s.CreateActivity(context.Background(), a, nil); !errors.Is(err, sale.ErrExists) {
		t.Errorf("second create: got %v, want ErrExists", err)
	}
	if _, err := s.Activity(context.Background(), "nope"); !errors.Is(err, sale.ErrNotFound) {
		t.Errorf("unknown activity: got %v, want ErrNotFound", err)
	}
	acts, err := s.Activities(context.Background(), t0.Add(2*time.Hour))
	if err != nil || len(acts) != 0 {
		t.Errorf("Activities after the end = %v, %v; want none", acts, err)
	}
	if acts, err := s.Activities(context.Background(), t0); err != nil || len(acts) != 1 || acts[0].ID != "a1" {
		t.Errorf("Activities during the sale = %v, %v; want a1", acts, err)
	}
}

func testPlaceOrdersGuardsStock(t *testing.T, dsn string) {
	s := openStore(t, dsn)
	create(t, s, item("a", 2, 1))
	ps := place(t, s, grab("a", "u1", 0), grab("a", "u2", 0), grab("a", "u3", 0))
	want := []sale.Status{sale.StatusCreated, sale.StatusCreated, sale.StatusFailed}
	if diff := cmp.Diff(want, statuses(ps)); diff != "" {
		t.Fatalf("statuses (-want +got):\n%s", diff)
	}
	if ps[0].Order.ExpiresAt != t0.Add(11*time.Minute) {
		t.Errorf("expires_at = %v, want grab time + pay window", ps[0].Order.ExpiresAt)
	}
	// Redelivery of the whole batch changes nothing.
	again := place(t, s, grab("a", "u1", 0), grab("a", "u2", 0), grab("a", "u3", 0))
	for i, p := range again {
		if p.New || p.Order.ID != ps[i].Order.ID || p.Order.Status != ps[i].Order.Status {
			t.Errorf("redelivery %d = %+v, want the first placement %+v unchanged", i, p, ps[i])
		}
	}
	c, err := s.Counts(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sale.Counts{Orders: 3, Created: 2, Failed: 1}, c); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
}

func testPlaceOrdersGuardsPerUserLimit(t *testing.T, dsn string) {
	s := openStore(t, dsn)
	for _, limit := range []int64{1, 2} {
		t.Run(fmt.Sprint("limit ", limit), func(t *testing.T) {
			id := fmt.Sprint("a", limit)
			grab := func(act, user string, n int) sale.Grab { return grab(id, user, n) }
			create(t, s, item(id, 10, limit))
			var gs []sale.Grab
			for n := range 3 {
				gs = append(gs, grab("a", "u1", n))
			}
			ps := place(t, s, gs...)
			created := 0
			for _, p := range ps {
				if p.Order.Status == sale.StatusCreated {
					created++
				}
			}
			if int64(created) != limit {
				t.Fatalf("user got %d orders, want the limit %d", created, limit)
			}
			// A cancelled order frees its slot.
			if _, won, err := s.Cancel(context.Background(), ps[0].Order.Token, "test", t0); err != nil || !won {
				t.Fatalf("Cancel = %v, %v", won, err)
			}
			if p := place(t, s, grab("a", "u1", 9)); p[0].Order.Status != sale.StatusCreated {
				t.Fatalf("grab after a cancel: %s, want CREATED", p[0].Order.Status)
			}
		})
	}
}

// testCancelOwesTheRestock: the cancel that won records its restock as owed, in its own
// transaction; a cancel that lost records nothing; Released settles it, twice harmlessly.
func testCancelOwesTheRestock(t *testing.T, dsn string) {
	ctx := context.Background()
	s := openStore(t, dsn)
	create(t, s, item("a", 5, 1))
	ps := place(t, s, grab("a", "u1", 0), grab("a", "u2", 0), grab("a", "u3", 0))
	if owed, err := s.Unreleased(ctx, 10); err != nil || len(owed) != 0 {
		t.Fatalf("owed before any cancel: %v, %v", owed, err)
	}
	for i, p := range ps[:2] {
		if _, won, err := s.Cancel(ctx, p.Order.Token, "test", t0.Add(time.Duration(i)*time.Second)); err != nil || !won {
			t.Fatalf("Cancel = %v, %v", won, err)
		}
	}
	if _, won, err := s.Cancel(ctx, ps[0].Order.Token, "test", t0.Add(time.Hour)); err != nil || won {
		t.Fatalf("a second Cancel = %v, %v; want not won", won, err)
	}
	owed, err := s.Unreleased(ctx, 10)
	if err != nil || len(owed) != 2 || owed[0].Token != ps[0].Order.Token || owed[1].Token != ps[1].Order.Token ||
		owed[0].Status != sale.StatusCancelled || owed[0].UserID != "u1" {
		t.Fatalf("owed after two cancels: %+v, %v; want both orders, oldest first, once each", owed, err)
	}
	if owed, err := s.Unreleased(ctx, 1); err != nil || len(owed) != 1 {
		t.Fatalf("owed, at most 1: %v, %v", owed, err)
	}
	for range 2 {
		if err := s.Released(ctx, ps[0].Order.Token); err != nil {
			t.Fatal(err)
		}
	}
	if owed, err := s.Unreleased(ctx, 10); err != nil || len(owed) != 1 || owed[0].Token != ps[1].Order.Token {
		t.Fatalf("owed after one was released: %+v, %v", owed, err)
	}
}

func testPayAndCancelTransitions(t *testing.T, dsn string) {
	ctx := context.Background()
	s := openStore(t, dsn)
	create(t, s, item("a", 5, 1))
	ps := place(t, s, grab("a", "u1", 0), grab("a", "u2", 0), grab("a", "u3", 0))
	paid, cancelled, late := ps[0].Order.Token, ps[1].Order.Token, ps[2].Order.Token
	in := t0.Add(2 * time.Minute)

	if o, err := s.Pay(ctx, paid, in); err != nil || o.Status != sale.StatusPaid {
		t.Fatalf("Pay = %v, %v; want PAID", o.Status, err)
	}
	if o, err := s.Pay(ctx, paid, in); err != nil || o.Status != sale.StatusPaid {
		t.Fatalf("second Pay = %v, %v; want PAID again", o.Status, err)
	}
	if _, _, err := s.Cancel(ctx, paid, "test", in); !errors.Is(err, sale.ErrInvalidState) {
		t.Fatalf("Cancel of a paid order: got %v, want ErrInvalidState", err)
	}

	if _, won, err := s.Cancel(ctx, cancelled, "test", in); err != nil || !won {
		t.Fatalf("Cancel = %v, %v", won, err)
	}
	if o, won, err := s.Cancel(ctx, cancelled, "test", in); err != nil || won || o.Status != sale.StatusCancelled {
		t.Fatalf("second Cancel = %v, %v, %v; want CANCELLED, not won", o.Status, won, err)
	}
	if _, err := s.Pay(ctx, cancelled, in); !errors.Is(err, sale.ErrInvalidState) {
		t.Fatalf("Pay after cancel: got %v, want ErrInvalidState", err)
	}

	if _, err := s.Pay(ctx, late, t0.Add(time.Hour)); !errors.Is(err, sale.ErrInvalidState) {
		t.Fatalf("Pay after the window: got %v, want ErrInvalidState", err)
	}
	exp, err := s.Expired(ctx, t0.Add(time.Hour), 10)
	if err != nil || len(exp) != 1 || exp[0].Token != late {
		t.Fatalf("Expired = %v, %v; want just %s", exp, err, late)
	}
	if _, won, err := s.Cancel(ctx, late, sale.ReasonExpired, t0.Add(time.Hour)); err != nil || !won {
		t.Fatalf("Cancel of the expired order = %v, %v", won, err)
	}
	c, err := s.Counts(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sale.Counts{Orders: 3, Paid: 1, Cancelled: 2, Expired: 1}, c); diff != "" {
		t.Errorf("counts: one paid, one cancelled by its buyer, one expired (-want +got):\n%s", diff)
	}
	if _, err := s.Pay(ctx, "nope", in); !errors.Is(err, sale.ErrNotFound) {
		t.Fatalf("Pay of an unknown order: got %v, want ErrNotFound", err)
	}
}

// TestConcurrentCancelRestocksOnce races many cancellers and payers on each order: exactly one of
// them changes it, and the database's count of held units comes back by exactly the number of
// cancelled orders.
func testConcurrentCancelRestocksOnce(t *testing.T, dsn string) {
	ctx := context.Background()
	s := openStore(t, dsn)
	const orders = 20
	create(t, s, item("a", orders, 1))
	var gs []sale.Grab
	for u := range orders {
		gs = append(gs, grab("a", fmt.Sprint("u", u), 0))
	}
	ps := place(t, s, gs...)
	now := t0.Add(2 * time.Minute)
	var mu sync.Mutex
	wins := map[string]int{}
	paid := map[string]bool{}
	var wg sync.WaitGroup
	for _, p := range ps {
		for i := range 8 {
			wg.Go(func() {
				if i%4 == 0 {
					if o, err := s.Pay(ctx, p.Order.Token, now); err == nil && o.Status == sale.StatusPaid {
						mu.Lock()
						paid[p.Order.Token] = true
						mu.Unlock()
					}
					return
				}
				_, won, err := s.Cancel(ctx, p.Order.Token, "sweep", now)
				if err != nil && !errors.Is(err, sale.ErrInvalidState) {
					t.Errorf("Cancel: %v", err)
				}
				if won {
					mu.Lock()
					wins[p.Order.Token]++
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	for tok, n := range wins {
		if n != 1 {
			t.Errorf("order %s was cancelled %d times", tok, n)
		}
		if paid[tok] {
			t.Errorf("order %s is both paid and cancelled", tok)
		}
	}
	if len(wins)+len(paid) != orders {
		t.Fatalf("%d cancelled + %d paid, want %d orders settled", len(wins), len(paid), orders)
	}
	var sold int64
	if err := s.r.QueryRowContext(ctx, `SELECT sold FROM activities WHERE id = 'a'`).Scan(&sold); err != nil {
		t.Fatal(err)
	}
	if sold != int64(len(paid)) {
		t.Fatalf("sold = %d, want the %d paid orders", sold, len(paid))
	}
}

func testRedPacketShares(t *testing.T, dsn string) {
	ctx := context.Background()
	s := openStore(t, dsn)
	a := item("rp", 3, 1)
	a.Kind, a.PriceCents, a.TotalCents = sale.KindRedPacket, 0, 600
	create(t, s, a, 100, 200, 300)
	g1, g2 := grab("rp", "u1", 0), grab("rp", "u2", 0)
	g1.Share, g1.AmountCents = 2, 300
	g2.Share, g2.AmountCents = 2, 300 // the same share: a lying gate
	ps := place(t, s, g1, g2)
	if diff := cmp.Diff([]sale.Status{sale.StatusCreated, sale.StatusFailed}, statuses(ps)); diff != "" {
		t.Fatalf("statuses (-want +got):\n%s", diff)
	}
	st, err := s.GateState(ctx, a, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]sale.Share{{Index: 0, AmountCents: 100}, {Index: 1, AmountCents: 200}}, st.Shares); diff != "" {
		t.Fatalf("free shares (-want +got):\n%s", diff)
	}
	if _, won, err := s.Cancel(ctx, g1.Token, "test", t0); err != nil || !won {
		t.Fatalf("Cancel = %v, %v", won, err)
	}
	if st, _ = s.GateState(ctx, a, nil); len(st.Shares) != 3 {
		t.Fatalf("after cancel %d shares are free, want 3", len(st.Shares))
	}
}

func testJournal(t *testing.T, dsn string) {
	ctx := context.Background()
	s := openStore(t, dsn)
	j, err := OpenJournal(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	create(t, s, item("a", 10, 1))
	gs := []sale.Grab{grab("a", "u1", 0), grab("a", "u2", 0), grab("a", "u3", 0)}
	gs[1].IdempotencyKey = "k"
	gs[2].Trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" // carried to the worker
	if err := j.AppendGrabs(ctx, gs); err != nil {
		t.Fatal(err)
	}
	if err := j.AppendGrabs(ctx, gs[:1]); err != nil { // a replayed batch is harmless
		t.Fatal(err)
	}
	ds, err := j.QueuedGrabs(ctx, 0, 10)
	if err != nil || len(ds) != 3 {
		t.Fatalf("QueuedGrabs = %d, %v; want 3", len(ds), err)
	}
	for i, d := range ds {
		if diff := cmp.Diff(gs[i], d.Grab); diff != "" {
			t.Errorf("delivery %d (-want +got):\n%s", i, diff)
		}
	}
	if more, _ := j.QueuedGrabs(ctx, 0, 1); len(more) != 1 || more[0].Grab.Token != gs[0].Token {
		t.Errorf("QueuedGrabs limit 1 = %v, want the oldest", more)
	}
	// u1's grab is placed and acknowledged; u2's is placed but the ack was lost; u3's is queued.
	place(t, s, gs[0], gs[1])
	if err := j.RemoveGrabs(ctx, []string{gs[0].Token}); err != nil {
		t.Fatal(err)
	}
	if n, _ := j.QueueDepth(ctx, "a"); n != 2 {
		t.Errorf("QueueDepth = %d, want 2", n)
	}
	if _, err := j.QueuedGrab(ctx, gs[0].Token); !errors.Is(err, sale.ErrNotFound) {
		t.Errorf("QueuedGrab of a removed grab: got %v, want ErrNotFound", err)
	}
	unacked, err := j.UnackedGrabs(ctx, "a")
	if err != nil || len(unacked) != 2 {
		t.Fatalf("UnackedGrabs = %v, %v", unacked, err)
	}
	st, err := s.GateState(ctx, item("a", 10, 1), unacked)
	if err != nil {
		t.Fatal(err)
	}
	// Each grab is held once, though u2's is both an order and still queued.
	if len(st.Held) != 3 {
		t.Errorf("held = %d grabs, want 3: %+v", len(st.Held), st.Held)
	}
	if len(st.Keyed) != 1 || st.Keyed[0].Token != gs[1].Token {
		t.Errorf("keyed = %+v, want u2's grab", st.Keyed)
	}
}

// testGateStateOfALongQueue: of 1,203 queued grabs (more than one query's worth of tokens), the
// ones whose order was placed and cancelled before the queue's ack was lost hold nothing, the
// ones placed are held once, and the rest are held as queued.
func testGateStateOfALongQueue(t *testing.T, dsn string) {
	ctx := context.Background()
	s := openStore(t, dsn)
	const n = 1203
	a := item("long", n, 1)
	create(t, s, a)
	queued := make([]sale.Grab, n)
	for i := range queued {
		queued[i] = grab("long", fmt.Sprint("u", i), 0)
	}
	place(t, s, queued[:600]...)
	cancelled := 0
	for i := 0; i < 600; i += 7 {
		if _, _, err := s.Cancel(ctx, queued[i].Token, "test", t0.Add(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		cancelled++
	}
	st, err := s.GateState(ctx, a, queued)
	if err != nil {
		t.Fatal(err)
	}
	if want := n - cancelled; len(st.Held) != want {
		t.Fatalf("held %d grabs, want %d (%d queued, %d of them placed and cancelled)", len(st.Held), want, n, cancelled)
	}
	held := map[string]bool{}
	for _, g := range st.Held {
		if held[g.Token] {
			t.Fatalf("grab %s held twice", g.Token)
		}
		held[g.Token] = true
	}
	for i := 0; i < 600; i += 7 {
		if held[queued[i].Token] {
			t.Fatalf("cancelled grab %s is held", queued[i].Token)
		}
	}
}

func TestOpenRefusesBadNames(t *testing.T) {
	for _, dsn := range []string{"", "sqlite:", "oracle://x", "/tmp/x.db", "mysql://", "mysql://host/",
		"mysql://root@127.0.0.1:1/db?foo=bar"} {
		if _, err := Open(context.Background(), dsn); !errors.Is(err, sale.ErrInvalid) {
			t.Errorf("Open(%q): got %v, want ErrInvalid", dsn, err)
		}
	}
}

func testReopenKeepsData(t *testing.T, dsn string) {
	s, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	create(t, s, item("a", 1, 1))
	place(t, s, grab("a", "u1", 0))
	s.Close()
	s, err = Open(context.Background(), dsn) // migrations run again: a no-op
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if o, err := s.Order(context.Background(), grab("a", "u1", 0).Token); err != nil || o.Status != sale.StatusCreated {
		t.Fatalf("order after reopen = %+v, %v", o, err)
	}
}

// TestPlacementIsWhatWasStored checks that the order PlaceOrders returns (built without reading
// it back) is the row the database holds.
func testPlacementIsWhatWasStored(t *testing.T, dsn string) {
	s := openStore(t, dsn)
	create(t, s, item("a", 5, 2))
	g := grab("a", "u1", 0)
	g.IdempotencyKey = "k"
	g.At = g.At.Add(1234567 * time.Nanosecond) // below a millisecond is not kept
	p := place(t, s, g)[0]
	got, err := s.Order(context.Background(), g.Token)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, p.Order); diff != "" {
		t.Fatalf("placement differs from the stored order (-stored +returned):\n%s", diff)
	}
}

// testConcurrentPlacementOfOneGrab has several workers place the same grabs at once (a
// redelivery racing the first delivery): each grab still gets exactly one order and one unit.
func testConcurrentPlacementOfOneGrab(t *testing.T, dsn string) {
	s := openStore(t, dsn)
	const users = 20
	create(t, s, item("a", users, 1))
	var gs []sale.Grab
	for u := range users {
		gs = append(gs, grab("a", fmt.Sprint("u", u), 0))
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			batch := append([]sale.Grab(nil), gs...)
			if w%2 == 1 {
				slices.Reverse(batch)
			}
			for {
				_, err := s.PlaceOrders(context.Background(), batch)
				if err == nil {
					return
				}
				t.Logf("worker %d retries: %v", w, err) // deadlocks between racing workers are retried
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	c, err := s.Counts(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if c.Orders != users || c.Created != users {
		t.Fatalf("counts %+v after four workers placed %d grabs; want %d orders, all CREATED", c, users, users)
	}
	var sold int64
	if err := s.r.QueryRowContext(context.Background(), `SELECT sold FROM activities WHERE id = 'a'`).Scan(&sold); err != nil {
		t.Fatal(err)
	}
	if sold != users {
		t.Fatalf("sold = %d, want %d", sold, users)
	}
}

// testBlocks: the blacklist round-trips, an entry replaces its namesake, expired entries are not
// listed, and removing an absent entry is ErrNotFound.
func testBlocks(t *testing.T, dsn string) {
	ctx := context.Background()
	s := openStore(t, dsn)
	forever := sale.Block{Kind: sale.BlockUser, Value: "bot-1", Reason: "scalping", CreatedAt: t0}
	net := sale.Block{Kind: sale.BlockIP, Value: "203.0.113.0/24", Reason: "farm", Until: t0.Add(time.Hour), CreatedAt: t0}
	short := sale.Block{Kind: sale.BlockUser, Value: "bot-2", Reason: "cadence", Until: t0.Add(time.Minute), CreatedAt: t0}
	for _, b := range []sale.Block{forever, net, short} {
		if err := s.AddBlock(ctx, b); err != nil {
			t.Fatalf("AddBlock(%v): %v", b, err)
		}
	}
	got, err := s.Blocks(ctx, t0.Add(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]sale.Block{net, forever, short}, got); diff != "" {
		t.Fatalf("blocks (-want +got):\n%s", diff)
	}
	if got, _ := s.Blocks(ctx, t0.Add(2*time.Minute)); len(got) != 2 {
		t.Fatalf("after bot-2's block ended: %v", got)
	}
	renewed := short
	renewed.Until, renewed.Reason = time.Time{}, "again"
	if err := s.AddBlock(ctx, renewed); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Blocks(ctx, t0.Add(2*time.Minute)); len(got) != 3 || got[2] != renewed {
		t.Fatalf("the renewed entry: %v", got)
	}
	if err := s.RemoveBlock(ctx, sale.BlockUser, "bot-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveBlock(ctx, sale.BlockUser, "bot-1"); !errors.Is(err, sale.ErrNotFound) {
		t.Fatalf("removing it twice: %v", err)
	}
	if got, _ := s.Blocks(ctx, t0); len(got) != 2 {
		t.Fatalf("after the removal: %v", got)
	}
}

// testLeaderboardQueries: the database's leaderboard (the fallback) against a sorting oracle, on
// a red packet with many equal amounts and equal times, so that every tie-break is exercised; a
// cancelled order leaves it.
func testLeaderboardQueries(t *testing.T, dsn string) {
	s := openStore(t, dsn)
	ctx := context.Background()
	const n = 300
	rng := rand.New(rand.NewPCG(4, 2))
	shares := make([]int64, n)
	for i := range shares {
		shares[i] = 1 + rng.Int64N(8)
	}
	a := sale.Activity{ID: "lb", Name: "rain", Kind: sale.KindRedPacket, Stock: n, TotalCents: 0, PerUserLimit: 1,
		StartAt: t0, EndAt: t0.Add(time.Hour), PayWindow: time.Hour, Admission: sale.AdmitDirect, CreatedAt: t0}
	for _, v := range shares {
		a.TotalCents += v
	}
	create(t, s, a, shares...)
	gs := make([]sale.Grab, n)
	for i := range gs {
		gs[i] = sale.Grab{Token: fmt.Sprintf("g%03d", rng.IntN(1000)) + fmt.Sprint(i), ActivityID: "lb", UserID: fmt.Sprint("u", i),
			Share: int64(i), AmountCents: shares[i], At: t0.Add(time.Duration(rng.IntN(5)) * time.Millisecond)}
	}
	place(t, s, gs...)
	cancelled := gs[7]
	if _, won, err := s.Cancel(ctx, cancelled.Token, "test", t0); err != nil || !won {
		t.Fatalf("cancel: %v %v", won, err)
	}
	var live []sale.Grab
	for _, g := range gs {
		if g.Token != cancelled.Token {
			live = append(live, g)
		}
	}
	slices.SortFunc(live, func(x, y sale.Grab) int {
		switch {
		case x.AmountCents > y.AmountCents:
			return -1
		case x.AmountCents < y.AmountCents:
			return 1
		case !x.At.Equal(y.At):
			return x.At.Compare(y.At)
		}
		return strings.Compare(x.Token, y.Token)
	})
	top, err := s.TopGrabs(ctx, "lb", 50)
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range top {
		if st.Rank != int64(i+1) || st.UserID != live[i].UserID || st.AmountCents != live[i].AmountCents || !st.GrabbedAt.Equal(live[i].At) {
			t.Fatalf("top %d = %+v, the oracle says %+v", i, st, live[i])
		}
	}
	for i, g := range live {
		if r, err := s.RankOf(ctx, g); err != nil || r != int64(i+1) {
			t.Fatalf("RankOf(%s) = %d, %v; the oracle says %d", g.Token, r, err, i+1)
		}
		if best, err := s.BestGrab(ctx, "lb", g.UserID); err != nil || best.Token != g.Token {
			t.Fatalf("BestGrab(%s) = %+v, %v", g.UserID, best, err)
		}
	}
	if _, err := s.BestGrab(ctx, "lb", cancelled.UserID); !errors.Is(err, sale.ErrNotFound) {
		t.Fatalf("BestGrab of a cancelled share: %v, want ErrNotFound", err)
	}
}

// testBatchPlacement: batches large enough for the multi-row path place exactly what the
// one-by-one path would: every order once with its own id, units claimed while the stock lasts
// and the rest FAILED, second units in their buyer's next slot, redeliveries answered with the
// order placed before.
func testBatchPlacement(t *testing.T, dsn string) {
	ctx := context.Background()
	s := openStore(t, dsn)
	sold := func(id string) int64 {
		t.Helper()
		var n int64
		if err := s.r.QueryRowContext(ctx, `SELECT sold FROM activities WHERE id = ?`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Enough stock: twenty new orders in one go, each readable with the id it was given.
	create(t, s, item("a", 30, 2))
	var gs []sale.Grab
	for u := range 20 {
		gs = append(gs, grab("a", fmt.Sprint("u", u), 0))
	}
	ps := place(t, s, gs...)
	ids := map[int64]bool{}
	for i, p := range ps {
		if !p.New || p.Order.Status != sale.StatusCreated || p.Order.Token != gs[i].Token || ids[p.Order.ID] {
			t.Fatalf("placement %d = %+v", i, p)
		}
		ids[p.Order.ID] = true
		stored, err := s.OrderByID(ctx, p.Order.ID)
		if err != nil || stored.Token != gs[i].Token || !stored.ExpiresAt.Equal(p.Order.ExpiresAt) {
			t.Fatalf("order %d read back = %+v, %v; want %+v", p.Order.ID, stored, err, p.Order)
		}
	}
	if n := sold("a"); n != 20 {
		t.Fatalf("sold = %d after 20 orders", n)
	}

	// The same batch again (a redelivery): the same orders, nothing claimed twice. Then a mixed
	// batch: second units of five buyers, five new buyers, and more than the 10 units left.
	again := place(t, s, gs...)
	for i, p := range again {
		if p.New || p.Order.ID != ps[i].Order.ID {
			t.Fatalf("redelivered placement %d = %+v, want the first (%d)", i, p, ps[i].Order.ID)
		}
	}
	var mixed []sale.Grab
	for u := range 5 {
		mixed = append(mixed, grab("a", fmt.Sprint("u", u), 1))
	}
	for u := 20; u < 32; u++ {
		mixed = append(mixed, grab("a", fmt.Sprint("u", u), 0))
	}
	ps = place(t, s, mixed...)
	created := 0
	for i, p := range ps {
		if !p.New {
			t.Fatalf("mixed placement %d not new: %+v", i, p)
		}
		if p.Order.Status == sale.StatusCreated {
			created++
		} else if p.Order.Status != sale.StatusFailed {
			t.Fatalf("mixed placement %d = %s", i, p.Order.Status)
		}
	}
	if created != 10 || sold("a") != 30 {
		t.Fatalf("%d created of 17 with 10 units left, sold %d; want 10 and 30", created, sold("a"))
	}
	c, err := s.Counts(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if c.Orders != 37 || c.Created != 30 || c.Failed != 7 {
		t.Fatalf("counts %+v; want 37 orders: 30 created, 7 failed", c)
	}

	// A lot the stock cannot cover: units claimed one by one until they run out.
	create(t, s, item("b", 6, 1))
	gs = gs[:0]
	for u := range 10 {
		gs = append(gs, grab("b", fmt.Sprint("u", u), 0))
	}
	if diff := cmp.Diff([]sale.Status{"CREATED", "CREATED", "CREATED", "CREATED", "CREATED", "CREATED",
		"FAILED", "FAILED", "FAILED", "FAILED"}, statuses(place(t, s, gs...))); diff != "" {
		t.Fatalf("statuses of 10 grabs on 6 units (-want +got):\n%s", diff)
	}
	if n := sold("b"); n != 6 {
		t.Fatalf("sold = %d of 6", n)
	}
}

// processCPU is the CPU time the test process has used so far, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// token makes the benchmark's grab tokens as the gates do.
var token = sale.NewGrabToken

// BenchmarkPlaceOrders places batches of 256 new orders of one item activity, one transaction
// each, with the multi-row path (lots) and without, on each database; and batches of 64, the
// most an all-win crowd of 64 connections leaves for one group commit of the embedded gate;
// and batches of 16, about what it leaves on a 2-core machine (13.5 grabs a commit measured
// with wrk), where the commit's fixed cost per batch is most of the cost per order:
//
//	go test -run '^$' -bench PlaceOrders -benchtime 40x ./internal/sqlstore
func BenchmarkPlaceOrders(b *testing.B) {
	for _, be := range backends {
		for _, run := range []struct {
			lots  bool
			batch int
		}{{false, 256}, {true, 256}, {true, 64}, {true, 16}} {
			lots, batch := run.lots, run.batch
			b.Run(fmt.Sprintf("%s/lots=%v/batch=%d", be.name, lots, batch), func(b *testing.B) {
				ctx := context.Background()
				s, err := Open(ctx, be.dsn(b))
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				s.lots = lots
				if err := s.CreateActivity(ctx, item("a", sale.MaxStock, 1), nil); err != nil {
					b.Fatal(err)
				}
				gs := make([]sale.Grab, batch)
				b.ResetTimer()
				cpu := processCPU()
				for n := range b.N {
					for i := range gs {
						gs[i] = grab("a", fmt.Sprint("u", n, "-", i), 0)
						gs[i].Token = token(time.Now()) // as the gates make them: the indexes' real load
					}
					if _, err := s.PlaceOrders(ctx, gs); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*batch), "µs/order")
				// The CPU, not the wall time, is what a batch costs the crowd beside it on the
				// same cores: the wall time also holds the fsync, which waits without it.
				b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N*batch), "cpu-µs/order")
			})
		}
	}
}

// testAuditLog: entries come back newest first, every field kept, paged by id.
func testAuditLog(t *testing.T, dsn string) {
	s := openStore(t, dsn)
	ctx := context.Background()
	if got, err := s.Entries(ctx, 0, 10); err != nil || len(got) != 0 {
		t.Fatalf("an empty log: %v, %v", got, err)
	}
	var want []sale.AuditEntry
	for i := range 5 {
		e := sale.AuditEntry{At: t0.Add(time.Duration(i) * time.Second), Actor: fmt.Sprint("op-", i),
			Action: "POST /api/admin/activities/{id}/reconcile", Target: fmt.Sprint("a", i), Remote: "203.0.113.7", Status: 200 + i}
		if err := s.Record(ctx, e); err != nil {
			t.Fatal(err)
		}
		want = append(want, e)
	}
	got, err := s.Entries(ctx, 0, 3)
	if err != nil || len(got) != 3 {
		t.Fatalf("the newest three: %v, %v", got, err)
	}
	for i, e := range got {
		w := want[4-i]
		w.ID = e.ID
		if e != w {
			t.Fatalf("entry %d: %+v, want %+v", i, e, w)
		}
		if i > 0 && e.ID >= got[i-1].ID {
			t.Fatalf("ids not falling: %d after %d", e.ID, got[i-1].ID)
		}
	}
	rest, err := s.Entries(ctx, got[2].ID, 10)
	if err != nil || len(rest) != 2 || rest[0].Actor != "op-1" || rest[1].Actor != "op-0" {
		t.Fatalf("the page before %d: %+v, %v; want op-1 and op-0", got[2].ID, rest, err)
	}
}

// testOrderEvents: every change of an order writes its event, once, with a delivery to each sink,
// in the change's own transaction; a store that names no sink writes none.
func testOrderEvents(t *testing.T, dsn string) {
	ctx := context.Background()
	quiet := openStore(t, dsn)
	create(t, quiet, item("q", 5, 1))
	place(t, quiet, grab("q", "u1", 0))
	if ds, err := quiet.Deliveries(ctx, sale.DeliveryFilter{Limit: 10}); err != nil || len(ds) != 0 {
		t.Fatalf("no sink: deliveries %v, %v; want none", ds, err)
	}

	s := openStore(t, dsn)
	s.EmitTo("hook-a", "hook-b")
	create(t, s, item("a", 6, 1))
	// Six grabs in one batch go in as a lot; the seventh finds no unit and fails.
	var gs []sale.Grab
	for i := range 7 {
		gs = append(gs, grab("a", fmt.Sprint("u", i), 0))
	}
	ps := place(t, s, gs...)
	if ps[6].Order.Status != sale.StatusFailed {
		t.Fatalf("the seventh grab: %+v", ps[6].Order)
	}
	place(t, s, gs[0]) // a redelivery: no new event
	in := t0.Add(2 * time.Minute)
	if _, err := s.Pay(ctx, ps[0].Order.Token, in); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pay(ctx, ps[0].Order.Token, in); err != nil { // paid twice: one event
		t.Fatal(err)
	}
	if _, _, err := s.Cancel(ctx, ps[1].Order.Token, "cancelled by the buyer", in); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Cancel(ctx, ps[2].Order.Token, sale.ReasonExpired, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}

	type ev struct {
		Token  string
		Type   sale.EventType
		Status sale.Status
	}
	want := map[string][]ev{} // per sink, oldest first
	for _, sink := range []string{"hook-a", "hook-b"} {
		var w []ev
		for i := range 6 {
			w = append(w, ev{ps[i].Order.Token, sale.EventCreated, sale.StatusCreated})
		}
		w = append(w, ev{ps[6].Order.Token, sale.EventFailed, sale.StatusFailed},
			ev{ps[0].Order.Token, sale.EventPaid, sale.StatusPaid},
			ev{ps[1].Order.Token, sale.EventCancelled, sale.StatusCancelled},
			ev{ps[2].Order.Token, sale.EventExpired, sale.StatusCancelled})
		want[sink] = w
	}
	for sink, w := range want {
		ds, err := s.Deliveries(ctx, sale.DeliveryFilter{Sink: sink, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var got []ev
		for i := len(ds) - 1; i >= 0; i-- { // newest first
			d := ds[i]
			got = append(got, ev{d.Order.Token, d.Type, d.Order.Status})
			if d.ID != sale.EventID(d.Order.Token, d.Type) || d.State != sale.DeliveryPending || d.Attempts != 0 ||
				d.Order.ActivityID != "a" || d.Order.ID == 0 || d.Order.AmountCents != 1999 || d.Sink != sink {
				t.Errorf("delivery %+v", d)
			}
			if i < len(ds)-1 && d.Seq <= ds[i+1].Seq {
				t.Errorf("seqs not in the order of writing: %d after %d", d.Seq, ds[i+1].Seq)
			}
		}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("%s: events (-want +got):\n%s", sink, diff)
		}
	}
	if ds, _ := s.Deliveries(ctx, sale.DeliveryFilter{Limit: 100}); len(ds) != 20 {
		t.Errorf("every sink's deliveries: %d, want 20", len(ds))
	}
	page, err := s.Deliveries(ctx, sale.DeliveryFilter{Sink: "hook-a", Limit: 3})
	if err != nil || len(page) != 3 {
		t.Fatalf("a page of 3: %v, %v", page, err)
	}
	older, err := s.Deliveries(ctx, sale.DeliveryFilter{Sink: "hook-a", Before: page[2].Seq, Limit: 100})
	if err != nil || len(older) != 7 || older[0].Seq >= page[2].Seq {
		t.Fatalf("the page before seq %d: %d deliveries, %v", page[2].Seq, len(older), err)
	}
}

// testEventDeliveryOrder: the relay is given an order's events one at a time, in the order they
// happened; a failure holds the order's later events back until it is delivered, and a parked
// event until it is replayed; each sink goes its own way.
func testEventDeliveryOrder(t *testing.T, dsn string) {
	ctx := context.Background()
	s := openStore(t, dsn)
	s.EmitTo("a", "b")
	create(t, s, item("x", 5, 1))
	ps := place(t, s, grab("x", "u1", 0), grab("x", "u2", 0))
	one, two := ps[0].Order.Token, ps[1].Order.Token
	in := t0.Add(2 * time.Minute)
	if _, err := s.Pay(ctx, one, in); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Cancel(ctx, two, "cancelled by the buyer", in); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(3 * time.Minute)
	due := func(sink string, at time.Time) []string {
		t.Helper()
		ds, err := s.Deliverable(ctx, sink, at, 10)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range ds {
			out = append(out, d.ID)
		}
		return out
	}
	check := func(what string, got, want []string) {
		t.Helper()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", what, diff)
		}
	}
	created1, created2 := sale.EventID(one, sale.EventCreated), sale.EventID(two, sale.EventCreated)
	paid1, cancelled2 := sale.EventID(one, sale.EventPaid), sale.EventID(two, sale.EventCancelled)
	check("first", due("a", now), []string{created1, created2})
	if err := s.Delivered(ctx, "a", created1, now); err != nil {
		t.Fatal(err)
	}
	// The second order's creation fails: retried in a minute, its cancellation waits behind it.
	if err := s.Failed(ctx, "a", created2, "connection refused", now.Add(time.Minute), false); err != nil {
		t.Fatal(err)
	}
	check("after one delivered and one failed", due("a", now), []string{paid1})
	check("a minute later, in the order of writing", due("a", now.Add(time.Minute)), []string{created2, paid1})
	if err := s.Failed(ctx, "a", created2, "HTTP 500", now, true); err != nil {
		t.Fatal(err)
	}
	check("parked", due("a", now.Add(time.Hour)), []string{paid1})
	check("the other sink", due("b", now), []string{created1, created2})
	parked, err := s.Deliveries(ctx, sale.DeliveryFilter{Sink: "a", State: sale.DeliveryParked, Limit: 10})
	if err != nil || len(parked) != 1 || parked[0].ID != created2 || parked[0].Attempts != 2 || parked[0].LastError != "HTTP 500" {
		t.Fatalf("parked: %+v, %v", parked, err)
	}
	if err := s.Failed(ctx, "a", created2, "again", now, false); !errors.Is(err, sale.ErrNotFound) {
		t.Fatalf("a failure of a parked delivery: %v, want ErrNotFound", err)
	}
	d, err := s.Replay(ctx, "a", created2, now)
	if err != nil || d.State != sale.DeliveryPending || d.Attempts != 0 || d.LastError != "" {
		t.Fatalf("replay: %+v, %v", d, err)
	}
	check("replayed", due("a", now), []string{created2, paid1})
	for _, id := range []string{paid1, created2} {
		if err := s.Delivered(ctx, "a", id, now); err != nil {
			t.Fatal(err)
		}
	}
	check("the cancellation after its creation", due("a", now), []string{cancelled2})
	if err := s.Delivered(ctx, "a", cancelled2, now); err != nil {
		t.Fatal(err)
	}
	check("all delivered", due("a", now), nil)
	if _, err := s.Replay(ctx, "a", "nope", now); !errors.Is(err, sale.ErrNotFound) {
		t.Fatalf("replay of nothing: %v", err)
	}
	if d, err := s.Replay(ctx, "a", created1, now); err != nil || d.State != sale.DeliveryPending {
		t.Fatalf("replay of a delivered event: %+v, %v", d, err)
	}
	check("a delivered event replayed", due("a", now), []string{created1})
}

// testEventPurge: the events every sink took before the cut go, with their deliveries; one that a
// sink has pending or parked, or took after the cut, stays, and so does one pending for a sink
// the store no longer names. Batches look at a bounded number of events, step past those held
// back, and stop at the first event newer than the cut.
func testEventPurge(t *testing.T, dsn string) {
	ctx := context.Background()
	old := openStore(t, dsn)
	old.EmitTo("a", "b", "gone")
	create(t, old, item("x", 10, 1))
	lone := place(t, old, grab("x", "u0", 0))[0].Order.Token // written for a, b and gone
	s := openStore(t, dsn)
	s.EmitTo("a", "b") // the configuration no longer names gone
	ps := place(t, s, grab("x", "u1", 0), grab("x", "u2", 0), grab("x", "u3", 0), grab("x", "u4", 0))
	if _, err := s.Pay(ctx, ps[0].Order.Token, t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	created := func(i int) string { return sale.EventID(ps[i].Order.Token, sale.EventCreated) }
	paid := sale.EventID(ps[0].Order.Token, sale.EventPaid)
	soon, late := t0.Add(3*time.Minute), t0.Add(10*time.Minute)
	deliver := func(sink, id string, at time.Time) {
		t.Helper()
		if err := s.Delivered(ctx, sink, id, at); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{created(0), created(3), paid, created(1), created(2), sale.EventID(lone, sale.EventCreated)} {
		deliver("a", id, soon)
	}
	deliver("b", created(0), soon)
	deliver("b", created(3), soon)
	deliver("b", paid, late)
	deliver("b", sale.EventID(lone, sale.EventCreated), soon)
	// created(1) stays pending for b; created(2) is parked there; lone's is pending for gone.
	if err := s.Failed(ctx, "b", created(2), "HTTP 500", soon, true); err != nil {
		t.Fatal(err)
	}
	count := func(table string) int {
		t.Helper()
		var n int
		if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	events := func(sink string) []string {
		t.Helper()
		ds, err := s.Deliveries(ctx, sale.DeliveryFilter{Sink: sink, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for i := len(ds) - 1; i >= 0; i-- {
			ids = append(ids, ds[i].ID)
		}
		return ids
	}
	purge := func(before time.Time, after int64, limit, wantDeleted int) int64 {
		t.Helper()
		n, next, err := s.PurgeDelivered(ctx, before, after, limit)
		if err != nil || n != wantDeleted {
			t.Fatalf("PurgeDelivered(%s, after %d, limit %d) = %d, %d, %v; want %d deleted", before, after, limit, n, next, err, wantDeleted)
		}
		return next
	}
	if e, d := count("order_events"), count("event_deliveries"); e != 6 || d != 13 {
		t.Fatalf("before: %d events, %d deliveries; want 6 and 13", e, d)
	}
	if next := purge(t0.Add(time.Minute), 0, 100, 0); next != 0 {
		t.Fatalf("before anything was delivered: next %d, want 0", next)
	}
	// Cut after the quick deliveries: the two creations every sink took then go; the payment,
	// which b took later, stays.
	if next := purge(t0.Add(5*time.Minute), 0, 100, 2); next != 0 {
		t.Fatalf("the whole outbox looked at: next %d, want 0", next)
	}
	lones := sale.EventID(lone, sale.EventCreated)
	if diff := cmp.Diff([]string{lones, created(1), created(2), paid}, events("a")); diff != "" {
		t.Errorf("a's deliveries after the purge (-want +got):\n%s", diff)
	}
	if e, d := count("order_events"), count("event_deliveries"); e != 4 || d != 9 {
		t.Errorf("after the purge: %d events, %d deliveries; want 4 and 9", e, d)
	}
	if _, err := s.Replay(ctx, "a", created(0), late); !errors.Is(err, sale.ErrNotFound) {
		t.Errorf("replay of a purged event: %v, want ErrNotFound", err)
	}
	if ds, err := s.Deliverable(ctx, "b", late, 10); err != nil || len(ds) != 1 || ds[0].ID != created(1) {
		t.Errorf("b's due deliveries after the purge: %+v, %v; want %s", ds, err, created(1))
	}
	// Batches of two: the first looks at lone's and created(1), both held back, and says where to
	// go on; the second finds created(2) held back and the payment gone; the third has nothing.
	cut := t0.Add(time.Hour)
	next := purge(cut, 0, 2, 0)
	if next == 0 {
		t.Fatal("a full batch of held-back events: next 0, want its last seq")
	}
	if next = purge(cut, next, 2, 1); next == 0 {
		t.Fatal("a full batch: next 0, want its last seq")
	}
	if next = purge(cut, next, 2, 0); next != 0 {
		t.Fatalf("past the end: next %d, want 0", next)
	}
	if diff := cmp.Diff([]string{lones, created(1), created(2)}, events("a")); diff != "" {
		t.Errorf("a's deliveries after the batches (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{lones}, events("gone")); diff != "" {
		t.Errorf("the dropped sink's deliveries (-want +got):\n%s", diff)
	}
	// A batch stops at the first event that happened after the cut, full or not.
	if _, err := s.Replay(ctx, "b", created(2), late); err != nil {
		t.Fatal(err)
	}
	deliver("b", created(2), late)
	deliver("b", created(1), late)
	later := place(t, s, sale.Grab{Token: "g-late", ActivityID: "x", UserID: "u9", AmountCents: 1999, At: t0.Add(2 * time.Hour)})
	if next := purge(t0.Add(90*time.Minute), 0, 4, 2); next != 0 {
		t.Fatalf("a full batch ending in a newer event: next %d, want 0", next)
	}
	if diff := cmp.Diff([]string{lones, sale.EventID(later[0].Order.Token, sale.EventCreated)}, events("a")); diff != "" {
		t.Errorf("a's deliveries at the end (-want +got):\n%s", diff)
	}
}

// testPayments walks payments through a provider: started once per order however often the
// buyer clicks, settled once however often the provider calls back, refused when the notice
// does not fit, and given back when the money comes for an order that cannot keep it.
func testPayments(t *testing.T, dsn string) {
	ctx := context.Background()
	s := openStore(t, dsn)
	s.EmitTo("hook")
	create(t, s, item("a", 5, 1))
	ps := place(t, s, grab("a", "u1", 0), grab("a", "u2", 0), grab("a", "u3", 0), grab("a", "u4", 0))
	kept, retried, late, unpaid := ps[0].Order.Token, ps[1].Order.Token, ps[2].Order.Token, ps[3].Order.Token
	in := t0.Add(2 * time.Minute)
	start := func(token, id string) sale.Payment {
		t.Helper()
		p, err := s.StartPayment(ctx, token, id, "signed", in)
		if err != nil {
			t.Fatalf("StartPayment(%s): %v", token, err)
		}
		return p
	}
	settle := func(id, token string, amount int64, outcome sale.PaymentOutcome) (sale.Settlement, error) {
		return s.Settle(ctx, sale.PaymentNotice{PaymentID: id, OrderToken: token, AmountCents: amount, Outcome: outcome, Provider: "signed"}, in)
	}
	want := func(st sale.Settlement, err error, changed bool, p sale.PaymentState, o sale.Status) {
		t.Helper()
		if err != nil || st.Changed != changed || st.Payment.State != p || st.Order.Status != o {
			t.Fatalf("settled: changed %v, payment %s, order %s, %v; want %v, %s, %s", st.Changed, st.Payment.State, st.Order.Status,
				err, changed, p, o)
		}
	}

	// Kept: one payment however often the buyer clicks, and one settlement however often the
	// provider calls back.
	p := start(kept, "pay-kept")
	if again := start(kept, "pay-kept-2"); again.ID != "pay-kept" || again.State != sale.PaymentStarted || again.AmountCents != 1999 {
		t.Fatalf("a second click started %+v; want pay-kept again", again)
	}
	// Notices that take no money are refused when they do not match the payment. (Money taken
	// is never refused: a succeeded notice of these is owed back, see testPaymentsOwedBack.)
	for _, bad := range []struct {
		name    string
		id      string
		token   string
		amount  int64
		outcome sale.PaymentOutcome
		want    error
	}{
		{"a failure of a wrong amount", p.ID, kept, 1998, sale.OutcomeFailed, sale.ErrAmountMismatch},
		{"a failure of another order", p.ID, retried, 1999, sale.OutcomeFailed, sale.ErrInvalid},
		{"a failure of an unknown payment", "pay-nope", kept, 1999, sale.OutcomeFailed, sale.ErrNotFound},
		{"a refund of an unknown payment", "pay-nope", kept, 1999, sale.OutcomeRefunded, sale.ErrNotFound},
	} {
		if _, err := settle(bad.id, bad.token, bad.amount, bad.outcome); !errors.Is(err, bad.want) {
			t.Errorf("%s: %v, want %v", bad.name, err, bad.want)
		}
	}
	if _, err := s.Payment(ctx, "pay-nope"); !errors.Is(err, sale.ErrNotFound) {
		t.Errorf("a refused notice of an unknown payment recorded it: %v", err)
	}
	if got, err := s.Payment(ctx, p.ID); err != nil || got.State != sale.PaymentStarted {
		t.Fatalf("after the refused notices: %+v, %v; want it still started", got, err)
	}
	st, err := settle(p.ID, kept, 1999, sale.OutcomeSucceeded)
	want(st, err, true, sale.PaymentSucceeded, sale.StatusPaid)
	st, err = settle(p.ID, kept, 1999, sale.OutcomeSucceeded)
	want(st, err, false, sale.PaymentSucceeded, sale.StatusPaid)
	for _, o := range []sale.PaymentOutcome{sale.OutcomeFailed, sale.OutcomeRefunded} {
		if _, err := settle(p.ID, kept, 1999, o); !errors.Is(err, sale.ErrInvalidState) {
			t.Errorf("%s after the money came: %v, want ErrInvalidState", o, err)
		}
	}
	if _, err := s.StartPayment(ctx, kept, "pay-kept-3", "signed", in); !errors.Is(err, sale.ErrInvalidState) {
		t.Errorf("a payment of a paid order: %v, want ErrInvalidState", err)
	}

	// Retried: a failed payment closes, the buyer starts another, and the first one's money
	// coming after all (the order paid by the second) goes back.
	first := start(retried, "pay-retried-1")
	st, err = settle(first.ID, retried, 1999, sale.OutcomeFailed)
	want(st, err, true, sale.PaymentFailed, sale.StatusCreated)
	st, err = settle(first.ID, retried, 1999, sale.OutcomeFailed)
	want(st, err, false, sale.PaymentFailed, sale.StatusCreated)
	second := start(retried, "pay-retried-2")
	if second.ID != "pay-retried-2" {
		t.Fatalf("after a failure the order's next payment is %s, want a new one", second.ID)
	}
	st, err = settle(second.ID, retried, 1999, sale.OutcomeSucceeded)
	want(st, err, true, sale.PaymentSucceeded, sale.StatusPaid)
	st, err = settle(first.ID, retried, 1999, sale.OutcomeSucceeded)
	want(st, err, true, sale.PaymentRefundPending, sale.StatusPaid)

	// Late: the sweeper cancels the order (its unit back on sale), then the money comes: never
	// a resurrection, a refund.
	lp := start(late, "pay-late")
	if _, won, err := s.Cancel(ctx, late, sale.ReasonExpired, t0.Add(time.Hour)); err != nil || !won {
		t.Fatalf("the sweeper's cancel: %v, %v", won, err)
	}
	st, err = settle(lp.ID, late, 1999, sale.OutcomeSucceeded)
	want(st, err, true, sale.PaymentRefundPending, sale.StatusRefundPending)
	st, err = settle(lp.ID, late, 1999, sale.OutcomeSucceeded)
	want(st, err, false, sale.PaymentRefundPending, sale.StatusRefundPending)
	c, err := s.Counts(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sale.Counts{Orders: 4, Created: 1, Paid: 2, RefundPending: 1}, c); diff != "" {
		t.Errorf("counts with a refund pending (-want +got):\n%s", diff)
	}
	st, err = settle(lp.ID, late, 1999, sale.OutcomeRefunded)
	want(st, err, true, sale.PaymentRefunded, sale.StatusRefunded)
	st, err = settle(lp.ID, late, 1999, sale.OutcomeRefunded)
	want(st, err, false, sale.PaymentRefunded, sale.StatusRefunded)
	if _, err := s.StartPayment(ctx, late, "pay-late-2", "signed", in); !errors.Is(err, sale.ErrInvalidState) {
		t.Errorf("a payment of a refunded order: %v, want ErrInvalidState", err)
	}
	// The late order's unit stayed on sale: four orders placed, two hold a unit, so three of
	// the five units can be sold still.
	var more []sale.Grab
	for i := range 4 {
		more = append(more, grab("a", fmt.Sprint("v", i), 0))
	}
	if got := statuses(place(t, s, more...)); !slices.Equal(got, []sale.Status{sale.StatusCreated, sale.StatusCreated,
		sale.StatusFailed, sale.StatusFailed}) {
		t.Errorf("units left after a refund: placements %v; want two more (u4 holds the third)", got)
	}

	if _, err := s.StartPayment(ctx, unpaid, "pay-unpaid", "signed", t0.Add(time.Hour)); !errors.Is(err, sale.ErrInvalidState) {
		t.Errorf("a payment after the window: %v, want ErrInvalidState", err)
	}
	if _, err := s.StartPayment(ctx, "g-nope", "pay-nope", "signed", in); !errors.Is(err, sale.ErrNotFound) {
		t.Errorf("a payment of an unknown order: %v, want ErrNotFound", err)
	}

	// The events name their payments; a refund's is named after it.
	type ev struct {
		ID, Payment string
		Status      sale.Status
	}
	ds, err := s.Deliveries(ctx, sale.DeliveryFilter{Sink: "hook", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]ev{}
	for i := len(ds) - 1; i >= 0; i-- {
		d := ds[i]
		if d.Type != sale.EventCreated && d.Type != sale.EventFailed {
			got[d.Order.Token] = append(got[d.Order.Token], ev{d.ID, d.PaymentID, d.Order.Status})
		}
	}
	wantEvents := map[string][]ev{
		kept:    {{kept + ".paid", "pay-kept", sale.StatusPaid}},
		retried: {{retried + ".paid", "pay-retried-2", sale.StatusPaid}, {"pay-retried-1.refund_requested", "pay-retried-1", sale.StatusPaid}},
		late: {{late + ".expired", "", sale.StatusCancelled}, {"pay-late.refund_requested", "pay-late", sale.StatusRefundPending},
			{"pay-late.refunded", "pay-late", sale.StatusRefunded}},
	}
	if diff := cmp.Diff(wantEvents, got); diff != "" {
		t.Errorf("the payments' events (-want +got):\n%s", diff)
	}

	pending, err := s.Payments(ctx, sale.PaymentFilter{State: sale.PaymentRefundPending, Limit: 10})
	if err != nil || len(pending) != 1 || pending[0].ID != "pay-retried-1" || pending[0].RefundReason != sale.RefundPaidTwice ||
		pending[0].ReceivedCents != 1999 {
		t.Errorf("refunds pending: %+v, %v; want pay-retried-1, 1999 cents received, paid twice", pending, err)
	}
	for id, want := range map[string]sale.RefundReason{"pay-kept": "", "pay-retried-2": "", "pay-late": sale.RefundOrderClosed} {
		if p, err := s.Payment(ctx, id); err != nil || p.ReceivedCents != 1999 || p.RefundReason != want {
			t.Errorf("payment %s: %+v, %v; want 1999 cents received, owed back for %q", id, p, err, want)
		}
	}
	of, err := s.Payments(ctx, sale.PaymentFilter{OrderToken: retried, Limit: 10})
	if err != nil || len(of) != 2 {
		t.Errorf("the payments of %s: %+v, %v; want two", retried, of, err)
	}
}

// testPaymentsOwedBack: a signed notice of money taken that no order can keep (another amount
// than the payment's, another order, a payment id never issued, for an order we have or not) is
// recorded as owed back with what was received and why, once however often it comes, with an
// order.refund_requested event when the money is of an order of ours; the buyer can still pay
// the order; and the refund, of what was received, closes it.
func testPaymentsOwedBack(t *testing.T, dsn string) {
	ctx := context.Background()
	s := openStore(t, dsn)
	s.EmitTo("hook")
	create(t, s, item("a", 5, 1))
	ps := place(t, s, grab("a", "u1", 0), grab("a", "u2", 0), grab("a", "u3", 0), grab("a", "u4", 0))
	edited, other, cancelled, named := ps[0].Order.Token, ps[1].Order.Token, ps[2].Order.Token, ps[3].Order.Token
	in := t0.Add(2 * time.Minute)
	settle := func(id, token string, amount int64, outcome sale.PaymentOutcome) (sale.Settlement, error) {
		return s.Settle(ctx, sale.PaymentNotice{PaymentID: id, OrderToken: token, AmountCents: amount, Outcome: outcome, Provider: "signed"}, in)
	}
	owed := func(what string, st sale.Settlement, err error, changed bool, received int64, reason sale.RefundReason, o sale.Status) {
		t.Helper()
		if err != nil || st.Changed != changed || st.Payment.State != sale.PaymentRefundPending || st.Payment.ReceivedCents != received ||
			st.Payment.RefundReason != reason || st.Order.Status != o {
			t.Fatalf("%s: %+v, %v; want changed %v, owed back (%s) %d cents received, the order %q", what, st, err, changed, reason,
				received, o)
		}
	}

	// The buyer edits the amount in the checkout URL: 2099 cents are taken for a 1999 order.
	p, err := s.StartPayment(ctx, edited, "pay-edited", "signed", in)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		st, err := settle(p.ID, edited, 2099, sale.OutcomeSucceeded)
		owed("another amount", st, err, i == 0, 2099, sale.RefundAmountMismatch, sale.StatusCreated)
	}
	if _, err := settle(p.ID, edited, 1999, sale.OutcomeSucceeded); !errors.Is(err, sale.ErrInvalidState) {
		t.Errorf("a second amount taken for one payment: %v, want ErrInvalidState", err)
	}
	// The order is still the buyer's to pay, by a payment of its amount.
	again, err := s.StartPayment(ctx, edited, "pay-edited-2", "signed", in)
	if err != nil || again.ID != "pay-edited-2" {
		t.Fatalf("a payment after one owed back: %+v, %v; want a new one", again, err)
	}
	if st, err := settle(again.ID, edited, 1999, sale.OutcomeSucceeded); err != nil || st.Order.Status != sale.StatusPaid {
		t.Fatalf("the order paid after all: %+v, %v", st, err)
	}

	// A notice of other's payment that names another order (cancelled, at that).
	op, err := s.StartPayment(ctx, other, "pay-other", "signed", in)
	if err != nil {
		t.Fatal(err)
	}
	if _, won, err := s.Cancel(ctx, cancelled, sale.ReasonExpired, in); err != nil || !won {
		t.Fatalf("cancel: %v, %v", won, err)
	}
	for i := range 2 {
		st, err := settle(op.ID, cancelled, 1999, sale.OutcomeSucceeded)
		owed("another order", st, err, i == 0, 1999, sale.RefundOrderMismatch, sale.StatusCreated)
	}
	if o, err := s.Order(ctx, cancelled); err != nil || o.Status != sale.StatusCancelled {
		t.Errorf("the order the notice named: %+v, %v; want it left CANCELLED", o, err)
	}

	// Payment ids never issued: for an order of ours (cancelled: it becomes REFUND_PENDING), for
	// one that is CREATED (left so), and for an order we do not have.
	for i := range 2 {
		st, err := settle("pay-stray-1", cancelled, 1500, sale.OutcomeSucceeded)
		owed("an unknown payment of a cancelled order", st, err, i == 0, 1500, sale.RefundUnknownPayment, sale.StatusRefundPending)
		if st.Payment.OrderToken != cancelled || st.Payment.AmountCents != 0 || st.Payment.UserID != "u3" || st.Payment.Provider != "signed" {
			t.Errorf("the unknown payment recorded: %+v; want it of %s (u3's), 0 asked, the notice's provider's", st.Payment, cancelled)
		}
		if p, err := s.Payment(ctx, "pay-stray-1"); err != nil || p.Provider != "signed" {
			t.Errorf("the unknown payment read back: %+v, %v; want it the notice's provider's", p, err)
		}
	}
	st, err := settle("pay-stray-2", named, 1999, sale.OutcomeSucceeded)
	owed("an unknown payment of a CREATED order", st, err, true, 1999, sale.RefundUnknownPayment, sale.StatusCreated)
	for i := range 2 {
		st, err := settle("pay-stray-3", "g-lost-in-a-restore", 4200, sale.OutcomeSucceeded)
		owed("an unknown payment of an unknown order", st, err, i == 0, 4200, sale.RefundUnknownPayment, "")
		if st.Order.Token != "" || st.Payment.OrderToken != "g-lost-in-a-restore" || st.Payment.ActivityID != "" {
			t.Errorf("money for an order we do not have: %+v", st)
		}
	}
	if _, err := s.StartPayment(ctx, named, "pay-named", "signed", in); err != nil {
		t.Errorf("a payment of an order an unknown payment named: %v", err)
	}
	// Copies of one notice of an unknown payment at once: recorded once, each answered.
	var changed atomic.Int32
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			st, err := settle("pay-stray-4", "g-lost-too", 300, sale.OutcomeSucceeded)
			if err != nil || st.Payment.State != sale.PaymentRefundPending {
				t.Errorf("a copy of an unknown payment's notice: %+v, %v", st, err)
			}
			if st.Changed {
				changed.Add(1)
			}
		})
	}
	wg.Wait()
	if changed.Load() != 1 {
		t.Errorf("4 copies of a notice at once changed %d times, want once", changed.Load())
	}

	pending, err := s.Payments(ctx, sale.PaymentFilter{State: sale.PaymentRefundPending, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, p := range pending {
		got[p.ID] = p.ReceivedCents
	}
	if diff := cmp.Diff(map[string]int64{"pay-edited": 2099, "pay-other": 1999, "pay-stray-1": 1500, "pay-stray-2": 1999,
		"pay-stray-3": 4200, "pay-stray-4": 300}, got); diff != "" {
		t.Errorf("the payments owed back (-want +got):\n%s", diff)
	}

	// The refunds: of what was received, not of what was asked.
	if _, err := settle("pay-edited", edited, 1999, sale.OutcomeRefunded); !errors.Is(err, sale.ErrAmountMismatch) {
		t.Errorf("a refund of the order's amount, 2099 received: %v, want ErrAmountMismatch", err)
	}
	for _, r := range []struct {
		id, token string
		cents     int64
		order     sale.Status
	}{
		{"pay-edited", edited, 2099, sale.StatusPaid},
		{"pay-other", cancelled, 1999, sale.StatusCreated}, // named by the payment id; the order is other's
		{"pay-stray-1", cancelled, 1500, sale.StatusRefunded},
		{"pay-stray-3", "g-lost-in-a-restore", 4200, ""},
	} {
		for i := range 2 {
			st, err := settle(r.id, r.token, r.cents, sale.OutcomeRefunded)
			if err != nil || st.Changed != (i == 0) || st.Payment.State != sale.PaymentRefunded || st.Order.Status != r.order {
				t.Errorf("the refund of %s: %+v, %v; want it refunded, the order %q", r.id, st, err, r.order)
			}
		}
	}

	// Every payment owed back of an order of ours asked for its refund; the one of no order
	// could not (there is no order to tell), and is found in the list above.
	// Each says what the provider took: what to give back.
	type ev struct {
		ID, Payment, Type string
		Cents             int64
	}
	ds, err := s.Deliveries(ctx, sale.DeliveryFilter{Sink: "hook", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var evs []ev
	for i := len(ds) - 1; i >= 0; i-- {
		if d := ds[i]; d.PaymentID != "" {
			evs = append(evs, ev{d.ID, d.PaymentID, string(d.Type), d.ReceivedCents})
		}
	}
	wantEvents := []ev{
		{"pay-edited.refund_requested", "pay-edited", string(sale.EventRefundRequested), 2099},
		{edited + ".paid", "pay-edited-2", string(sale.EventPaid), 1999},
		{"pay-other.refund_requested", "pay-other", string(sale.EventRefundRequested), 1999},
		{"pay-stray-1.refund_requested", "pay-stray-1", string(sale.EventRefundRequested), 1500},
		{"pay-stray-2.refund_requested", "pay-stray-2", string(sale.EventRefundRequested), 1999},
		{"pay-edited.refunded", "pay-edited", string(sale.EventRefunded), 2099},
		{"pay-other.refunded", "pay-other", string(sale.EventRefunded), 1999},
		{"pay-stray-1.refunded", "pay-stray-1", string(sale.EventRefunded), 1500},
	}
	if diff := cmp.Diff(wantEvents, evs); diff != "" {
		t.Errorf("the payments' events (-want +got):\n%s", diff)
	}
}

// testFailedThenSucceeded: a payment reported failed may succeed after all (a retry at the
// provider); the money is then taken like any other: kept while its order is CREATED, even past
// its window if the sweeper has not cancelled it (its unit is still held), and owed back when the
// order was cancelled meanwhile, was paid by the payment the buyer started after the failure, or
// is of another amount.
func testFailedThenSucceeded(t *testing.T, dsn string) {
	ctx := context.Background()
	s := openStore(t, dsn)
	s.EmitTo("hook")
	create(t, s, item("a", 6, 1))
	ps := place(t, s, grab("a", "u1", 0), grab("a", "u2", 0), grab("a", "u3", 0), grab("a", "u4", 0), grab("a", "u5", 0))
	retried, twice, closed, other, late := ps[0].Order.Token, ps[1].Order.Token, ps[2].Order.Token, ps[3].Order.Token, ps[4].Order.Token
	in, past := t0.Add(2*time.Minute), t0.Add(time.Hour) // within the 10 minutes of the windows, and after them
	failed := func(token, id string) sale.Payment {
		t.Helper()
		p, err := s.StartPayment(ctx, token, id, "signed", in)
		if err != nil {
			t.Fatal(err)
		}
		st, err := s.Settle(ctx, sale.PaymentNotice{PaymentID: p.ID, OrderToken: token, AmountCents: p.AmountCents,
			Outcome: sale.OutcomeFailed}, in)
		if err != nil || st.Payment.State != sale.PaymentFailed || st.Order.Status != sale.StatusCreated {
			t.Fatalf("the failure of %s: %+v, %v", id, st, err)
		}
		return p
	}
	succeeded := func(p sale.Payment, amount int64, at time.Time, state sale.PaymentState, reason sale.RefundReason, o sale.Status) {
		t.Helper()
		for i := range 2 {
			st, err := s.Settle(ctx, sale.PaymentNotice{PaymentID: p.ID, OrderToken: p.OrderToken, AmountCents: amount,
				Outcome: sale.OutcomeSucceeded}, at)
			if err != nil || st.Changed != (i == 0) || st.Payment.State != state || st.Payment.RefundReason != reason ||
				st.Payment.ReceivedCents != amount || st.Order.Status != o {
				t.Fatalf("%s succeeded after it failed: %+v, %v; want it %s (%q), the order %s", p.ID, st, err, state, reason, o)
			}
		}
	}

	// Retried at the provider within the window: kept.
	succeeded(failed(retried, "pay-retried"), 1999, in, sale.PaymentSucceeded, "", sale.StatusPaid)
	// The buyer started another payment after the failure; the first's retry succeeds first,
	// and pays the order: the second's money, when it comes, is paid twice.
	first := failed(twice, "pay-twice-1")
	second, err := s.StartPayment(ctx, twice, "pay-twice-2", "signed", in)
	if err != nil || second.ID != "pay-twice-2" {
		t.Fatalf("a payment after a failure: %+v, %v", second, err)
	}
	succeeded(first, 1999, in, sale.PaymentSucceeded, "", sale.StatusPaid)
	succeeded(second, 1999, in, sale.PaymentRefundPending, sale.RefundPaidTwice, sale.StatusPaid)
	// The order was cancelled (the sweeper, its window over) before the retry succeeded: its
	// unit went back on sale, and the money goes back.
	p := failed(closed, "pay-closed")
	if _, won, err := s.Cancel(ctx, closed, sale.ReasonExpired, past); err != nil || !won {
		t.Fatalf("the sweeper's cancel: %v, %v", won, err)
	}
	succeeded(p, 1999, past, sale.PaymentRefundPending, sale.RefundOrderClosed, sale.StatusRefundPending)
	// Another amount after the failure: owed back, the order still payable.
	succeeded(failed(other, "pay-other"), 2500, in, sale.PaymentRefundPending, sale.RefundAmountMismatch, sale.StatusCreated)
	// Past the window, the sweeper not there yet: the unit is still held, so the money is kept,
	// as for a payment that never failed.
	succeeded(failed(late, "pay-late"), 1999, past, sale.PaymentSucceeded, "", sale.StatusPaid)

	if c, err := s.Counts(ctx, "a"); err != nil || c.Paid != 3 || c.RefundPending != 1 || c.Created != 1 {
		t.Fatalf("counts %+v, %v; want 3 paid, 1 refund pending (its unit back on sale), 1 created", c, err)
	}
}

// testPaymentProviders: a payment is with the provider it was started with; a second click
// with that provider gets it back, one with another provider closes it and starts another, and
// the first provider's money, should it come all the same, is kept or owed back like any.
func testPaymentProviders(t *testing.T, dsn string) {
	ctx := context.Background()
	s := openStore(t, dsn)
	s.EmitTo("hook")
	create(t, s, item("a", 3, 1))
	ps := place(t, s, grab("a", "u1", 0), grab("a", "u2", 0))
	switched, raced := ps[0].Order.Token, ps[1].Order.Token
	in := t0.Add(2 * time.Minute)
	first, err := s.StartPayment(ctx, switched, "pay-alipay", "alipay", in)
	if err != nil || first.Provider != "alipay" || first.State != sale.PaymentStarted {
		t.Fatalf("started with alipay: %+v, %v", first, err)
	}
	if again, err := s.StartPayment(ctx, switched, "pay-alipay-2", "alipay", in); err != nil || again.ID != "pay-alipay" {
		t.Fatalf("a second click with alipay: %+v, %v; want the first payment", again, err)
	}
	second, err := s.StartPayment(ctx, switched, "pay-wechat", "wechatpay", in)
	if err != nil || second.ID != "pay-wechat" || second.Provider != "wechatpay" || second.State != sale.PaymentStarted {
		t.Fatalf("the buyer turned to wechatpay: %+v, %v", second, err)
	}
	if p, err := s.Payment(ctx, "pay-alipay"); err != nil || p.State != sale.PaymentFailed || p.Provider != "alipay" {
		t.Fatalf("the alipay payment after the switch: %+v, %v; want it failed", p, err)
	}
	if p, err := s.Payment(ctx, "pay-wechat"); err != nil || p.Provider != "wechatpay" {
		t.Fatalf("the wechatpay payment read back: %+v, %v", p, err)
	}
	// Both providers took the money all the same: Alipay's pays the order (a failure is not
	// final), WeChat Pay's is paid twice, owed back.
	for _, c := range []struct {
		id     string
		state  sale.PaymentState
		reason sale.RefundReason
	}{{"pay-alipay", sale.PaymentSucceeded, ""}, {"pay-wechat", sale.PaymentRefundPending, sale.RefundPaidTwice}} {
		st, err := s.Settle(ctx, sale.PaymentNotice{PaymentID: c.id, OrderToken: switched, AmountCents: 1999, Outcome: sale.OutcomeSucceeded}, in)
		if err != nil || st.Payment.State != c.state || st.Payment.RefundReason != c.reason || st.Order.Status != sale.StatusPaid {
			t.Fatalf("%s's money: %+v, %v; want it %s (%q), the order PAID", c.id, st, err, c.state, c.reason)
		}
	}
	// The provider's own name for a payment is recorded with its money, and a repeat of the
	// notice naming another does not change it.
	for _, ref := range []string{"2026120522001", "a-repeat-naming-another"} {
		if _, err := s.Settle(ctx, sale.PaymentNotice{PaymentID: "pay-alipay", OrderToken: switched, AmountCents: 1999,
			Outcome: sale.OutcomeSucceeded, Provider: "alipay", ProviderRef: ref}, in); err != nil {
			t.Fatal(err)
		}
	}
	if p, err := s.Payment(ctx, "pay-alipay"); err != nil || p.ProviderRef != "" {
		t.Fatalf("a reference after the money came: %+v, %v; want none recorded", p, err)
	}
	ref := place(t, s, grab("a", "u3", 0))[0].Order.Token
	if _, err := s.StartPayment(ctx, ref, "pay-ref", "alipay", in); err != nil {
		t.Fatal(err)
	}
	for i, r := range []string{"2026120522002", "a-repeat-naming-another"} {
		st, err := s.Settle(ctx, sale.PaymentNotice{PaymentID: "pay-ref", OrderToken: ref, AmountCents: 1999,
			Outcome: sale.OutcomeSucceeded, Provider: "alipay", ProviderRef: r}, in)
		if err != nil || st.Changed != (i == 0) {
			t.Fatalf("notice %d: %+v, %v", i, st, err)
		}
	}
	if p, err := s.Payment(ctx, "pay-ref"); err != nil || p.ProviderRef != "2026120522002" {
		t.Fatalf("the provider's reference: %+v, %v; want the first notice's", p, err)
	}
	// Clicks with two providers at once leave exactly one payment open.
	var wg sync.WaitGroup
	for i, provider := range []string{"alipay", "wechatpay", "stripe", "alipay"} {
		wg.Go(func() {
			if _, err := s.StartPayment(ctx, raced, fmt.Sprintf("pay-race-%d", i), provider, in); err != nil && !errors.Is(err, sale.ErrInvalidState) {
				t.Errorf("a racing click with %s: %v", provider, err)
			}
		})
	}
	wg.Wait()
	open, err := s.Payments(ctx, sale.PaymentFilter{OrderToken: raced, State: sale.PaymentStarted, Limit: 10})
	if err != nil || len(open) != 1 {
		t.Fatalf("after racing clicks: %d open payments (%+v), %v; want 1", len(open), open, err)
	}
}

// testRevisions: a revision is stored only on the one before it, never below the units sold,
// and owed to the gate until recorded given.
func testRevisions(t *testing.T, dsn string) {
	ctx := context.Background()
	s := openStore(t, dsn)
	a := item("a", 2, 1)
	create(t, s, a)
	place(t, s, grab("a", "u1", 0), grab("a", "u2", 0))
	got, err := s.Activity(ctx, "a")
	if err != nil || got.Revision != 1 {
		t.Fatalf("a new activity: revision %d, %v; want 1", got.Revision, err)
	}
	next := got
	next.Revision, next.Stock = 2, 5
	if err := s.ReviseActivity(ctx, next, sale.Revision{Add: 3}); err != nil {
		t.Fatal(err)
	}
	if err := s.ReviseActivity(ctx, next, sale.Revision{Add: 3}); !errors.Is(err, sale.ErrChanged) {
		t.Fatalf("revision 2 again: %v, want ErrChanged", err)
	}
	fewer := next
	fewer.Revision, fewer.Stock = 3, 1
	if err := s.ReviseActivity(ctx, fewer, sale.Revision{Reload: true}); !errors.Is(err, sale.ErrInvalid) {
		t.Fatalf("a stock below the 2 sold: %v, want ErrInvalid", err)
	}
	missing := next
	missing.ID = "nope"
	if err := s.ReviseActivity(ctx, missing, sale.Revision{}); !errors.Is(err, sale.ErrNotFound) {
		t.Fatalf("an unknown activity: %v, want ErrNotFound", err)
	}
	ended := next
	ended.Revision, ended.EndAt = 3, t0.Add(2*time.Minute)
	if err := s.ReviseActivity(ctx, ended, sale.Revision{Reload: true}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Activity(ctx, "a"); err != nil || got.Revision != 3 || got.Stock != 5 || !got.EndAt.Equal(ended.EndAt) {
		t.Fatalf("after two revisions: %+v, %v", got, err)
	}
	// The database's guard follows the stock: three more units can be placed.
	if got := statuses(place(t, s, grab("a", "u3", 0), grab("a", "u4", 0), grab("a", "u5", 0), grab("a", "u6", 0))); !slices.Equal(got,
		[]sale.Status{sale.StatusCreated, sale.StatusCreated, sale.StatusCreated, sale.StatusFailed}) {
		t.Errorf("placements on 5 units, 2 sold: %v", got)
	}
	// Revision 3 was made on a node whose clock is a minute behind the one that made revision 2:
	// the owed revisions still come in the order of their numbers.
	if _, err := s.w.ExecContext(ctx, `UPDATE activity_revisions SET at_ms = at_ms - 60000 WHERE activity_id = 'a' AND revision = 3`); err != nil {
		t.Fatal(err)
	}
	b := item("b", 2, 1)
	create(t, s, b)
	bNext, err := s.Activity(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	bNext.Revision, bNext.Stock = 2, 4
	if err := s.ReviseActivity(ctx, bNext, sale.Revision{Add: 2}); err != nil {
		t.Fatal(err)
	}
	owed, err := s.Unrevised(ctx, "a", 10)
	if err != nil || len(owed) != 2 || owed[0].Revision != 2 || owed[0].Add != 3 || owed[1].Revision != 3 || owed[1].Add != 0 || !owed[1].Reload || owed[0].Reload {
		t.Fatalf("owed of a: %+v, %v; want revisions 2 (3 units) and 3", owed, err)
	}
	if all, err := s.Unrevised(ctx, "", 10); err != nil || len(all) != 3 || all[0].ActivityID != "a" || all[1].Revision != 3 || all[2].ActivityID != "b" {
		t.Fatalf("owed of every activity: %+v, %v; want a's 2 and 3, then b's 2", all, err)
	}
	for range 2 {
		if err := s.Revised(ctx, "a", 2); err != nil {
			t.Fatal(err)
		}
	}
	if owed, err := s.Unrevised(ctx, "a", 10); err != nil || len(owed) != 1 || owed[0].Revision != 3 {
		t.Fatalf("owed after revision 2 was given: %+v, %v", owed, err)
	}
}

// testOperatorReads: orders by user and by activity, the export in order, and dead letters
// replayed once each, through the database's guard.
func testOperatorReads(t *testing.T, dsn string) {
	ctx := context.Background()
	s := openStore(t, dsn)
	s.EmitTo("hook")
	create(t, s, item("a", 4, 2)) // three units sold below, a fourth left for a dead letter
	create(t, s, item("b", 3, 1))
	place(t, s, grab("a", "u1", 0), grab("a", "u1", 1), grab("b", "u1", 0), grab("a", "u2", 0))
	of, err := s.Orders(ctx, sale.OrderFilter{UserID: "u1", Limit: 10})
	if err != nil || len(of) != 3 || of[0].ActivityID != "b" {
		t.Fatalf("u1's orders: %+v, %v; want 3, the newest first", of, err)
	}
	if of, err := s.Orders(ctx, sale.OrderFilter{UserID: "u1", ActivityID: "a", Before: of[1].ID + 1, Limit: 10}); err != nil || len(of) != 2 {
		t.Fatalf("u1's orders of a from the second: %+v, %v", of, err)
	}
	var ids []int64
	if err := s.EachOrder(ctx, "a", func(o sale.Order) error { ids = append(ids, o.ID); return nil }); err != nil || len(ids) != 3 ||
		!slices.IsSorted(ids) {
		t.Fatalf("the export of a: %v, %v", ids, err)
	}

	// Two dead letters of a: one finds the last unit, one none left; and one kept without its grab.
	dead := []sale.Grab{grab("a", "u3", 0), grab("a", "u4", 0)}
	for _, g := range dead {
		if err := s.DeadLetter(ctx, g, 5, "refused", t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	old := grab("a", "u5", 0)
	old.At = time.Time{}
	if err := s.DeadLetter(ctx, old, 5, "from before", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	ds, err := s.DeadLetters(ctx, "a", 10)
	if err != nil || len(ds) != 3 {
		t.Fatalf("dead letters: %+v, %v", ds, err)
	}
	// Replayed two hours after the grab, far past the 10 minutes of its window: the order's
	// window opens at the replay, or the next sweep would cancel it before its buyer could pay.
	replayed := t0.Add(2 * time.Hour)
	for i, want := range []sale.Status{sale.StatusCreated, sale.StatusFailed} {
		p, err := s.ReplayDeadLetter(ctx, dead[i].Token, replayed)
		if err != nil || !p.New || p.Order.Status != want || p.Order.UserID != dead[i].UserID {
			t.Fatalf("replay %d: %+v, %v; want %s", i, p, err, want)
		}
		if _, err := s.ReplayDeadLetter(ctx, dead[i].Token, replayed); !errors.Is(err, sale.ErrNotFound) {
			t.Fatalf("replay %d again: %v, want ErrNotFound", i, err)
		}
	}
	o, err := s.Order(ctx, dead[0].Token)
	if err != nil || !o.CreatedAt.Equal(dead[0].At) || !o.ExpiresAt.Equal(replayed.Add(10*time.Minute)) {
		t.Fatalf("the replayed order: %+v, %v; want it created at its grab, %s, and payable until %s", o, err, dead[0].At,
			replayed.Add(10*time.Minute))
	}
	ex, err := s.Expired(ctx, replayed.Add(10*time.Minute-time.Millisecond), 10)
	if err != nil || len(ex) != 4 || slices.ContainsFunc(ex, func(o sale.Order) bool { return o.Token == dead[0].Token }) {
		t.Fatalf("expired within the replayed order's window: %+v, %v; want the 4 orders placed at the grab, not it", ex, err)
	}
	if _, err := s.Pay(ctx, dead[0].Token, replayed.Add(9*time.Minute)); err != nil {
		t.Fatalf("paying the replayed order within its window: %v", err)
	}
	if _, err := s.ReplayDeadLetter(ctx, old.Token, replayed); !errors.Is(err, sale.ErrInvalid) {
		t.Fatalf("a dead letter without its grab: %v, want ErrInvalid", err)
	}
	if c, err := s.Counts(ctx, "a"); err != nil || c.Created != 3 || c.Paid != 1 || c.Failed != 1 || c.DeadLetters != 1 {
		t.Fatalf("counts after the replays: %+v, %v", c, err)
	}
	evs, err := s.Deliveries(ctx, sale.DeliveryFilter{Sink: "hook", Limit: 3})
	if err != nil || len(evs) != 3 || evs[0].Type != sale.EventPaid || evs[1].Type != sale.EventFailed || evs[2].Type != sale.EventCreated {
		t.Fatalf("the replays' events: %+v, %v", evs, err)
	}
}

// TestOrdersRebuiltByUser: migration 15 rebuilds SQLite's orders table with its per-user key
// led by the user. On a database at version 14 with orders and a payment, every order comes
// through as it was, ids go on from where they were, the key still refuses a second unit
// beyond the limit, the foreign keys are on again, and a user's orders are read through the
// new key.
func TestOrdersRebuiltByUser(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "seckill.db")
	old, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(ON)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := fs.Sub(migrations, "migrations/sqlite")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, old, sub)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 14); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO activities (id, name, kind, stock, price_cents, per_user_limit, start_at, end_at, pay_window_ms,
			total_cents, require_challenge, admission, created_at, sold) VALUES ('a', 'a', 'item', 10, 100, 1, 0, 1, 60000, 0, 0, 'direct', 0, 2)`,
		`INSERT INTO orders (token, activity_id, user_id, idem_key, slot, share_idx, amount_cents, status, reason, created_at, expires_at)
			VALUES ('g1', 'a', 'u1', '', 1, 0, 100, 'CREATED', '', 5, 60005), ('g2', 'a', 'u2', 'k', 1, 0, 100, 'PAID', '', 6, 60006),
			('g3', 'a', 'u3', '', NULL, 0, 100, 'CANCELLED', 'expired', 7, 60007)`,
		`INSERT INTO payments (payment_id, order_token, activity_id, user_id, amount_cents, state, created_at, updated_at)
			VALUES ('p1', 'g2', 'a', 'u2', 100, 'SETTLED', 6, 6)`,
	} {
		if _, err := old.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	before := dumpOrders(t, old)
	old.Close()

	s, err := Open(ctx, "sqlite:"+path)
	if err != nil {
		t.Fatalf("migrating a version 14 database: %v", err)
	}
	defer s.Close()
	if after := dumpOrders(t, s.w.DB); !slices.Equal(before, after) {
		t.Fatalf("the orders changed in the rebuild:\n%q\nwant\n%q", after, before)
	}
	var fk int
	if err := s.w.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk); err != nil || fk != 1 {
		t.Fatalf("foreign keys after the migration: %d, %v; want on", fk, err)
	}
	if _, err := s.w.ExecContext(ctx, `INSERT INTO orders (token, activity_id, user_id, idem_key, slot, share_idx, amount_cents,
		status, reason, created_at, expires_at) VALUES ('g4', 'a', 'u1', '', 1, 0, 100, 'CREATED', '', 8, 60008)`); err == nil ||
		!s.w.d.unique(err) {
		t.Fatalf("a second unit of u1 in slot 1: %v, want the unique key's refusal", err)
	}
	// (Probed on the orders' key to activities: since migration 16 a payment may name an order
	// we do not have, TestPaymentsOwedBackMigrated.)
	if _, err := s.w.ExecContext(ctx, `INSERT INTO orders (token, activity_id, user_id, idem_key, slot, share_idx, amount_cents,
		status, reason, created_at, expires_at) VALUES ('g5', 'nope', 'u9', '', 1, 0, 100, 'CREATED', '', 9, 60009)`); err == nil {
		t.Fatal("an order of no activity went in: the foreign keys do not hold")
	}
	placed := place(t, s, grab("a", "u4", 0))
	if placed[0].Order.ID != 4 {
		t.Fatalf("the first order after the rebuild has id %d, want 4 (ids go on)", placed[0].Order.ID)
	}
	mine, err := s.Orders(ctx, sale.OrderFilter{UserID: "u2", Limit: 10})
	if err != nil || len(mine) != 1 || mine[0].Token != "g2" || mine[0].Status != sale.StatusPaid {
		t.Fatalf("u2's orders: %+v, %v", mine, err)
	}
	var plan string
	if err := s.r.QueryRowContext(ctx, `EXPLAIN QUERY PLAN SELECT id FROM orders WHERE user_id = 'u2' ORDER BY id DESC LIMIT 10`).
		Scan(new(int), new(int), new(int), &plan); err != nil || !strings.Contains(plan, "INDEX sqlite_autoindex_orders_2 (user_id=?)") {
		t.Fatalf("a user's orders are read by %q (%v), want the per-user key", plan, err)
	}
}

// dumpOrders returns every order row of db, by id, as text.
// TestPaymentsOwedBackMigrated: migration 16 gives SQLite's payments what was received and why
// it is owed back, and lets a payment name an order the database does not have; 17 gives the
// events of payments what was received. On a database at version 15, the payments settled are
// given their amount as received, those owed back the reason their order's state says, the
// others nothing, and so are the events of a payment; a payment of no order then goes in, and
// the foreign keys still hold elsewhere.
func TestPaymentsOwedBackMigrated(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "seckill.db")
	old, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(ON)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := fs.Sub(migrations, "migrations/sqlite")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, old, sub)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 15); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO activities (id, name, kind, stock, price_cents, per_user_limit, start_at, end_at, pay_window_ms,
			total_cents, require_challenge, admission, created_at, sold) VALUES ('a', 'a', 'item', 10, 100, 1, 0, 1, 60000, 0, 0, 'direct', 0, 2)`,
		`INSERT INTO orders (token, activity_id, user_id, idem_key, slot, share_idx, amount_cents, status, reason, created_at, expires_at)
			VALUES ('g1', 'a', 'u1', '', 1, 0, 100, 'CREATED', '', 5, 60005), ('g2', 'a', 'u2', '', 1, 0, 100, 'PAID', '', 6, 60006),
			('g3', 'a', 'u3', '', NULL, 0, 100, 'REFUNDED', 'expired', 7, 60007)`,
		`INSERT INTO payments (payment_id, order_token, open_token, activity_id, user_id, amount_cents, state, created_at, updated_at)
			VALUES ('p-started', 'g1', 'g1', 'a', 'u1', 100, 'started', 5, 5), ('p-failed', 'g2', NULL, 'a', 'u2', 100, 'failed', 6, 6),
			('p-kept', 'g2', NULL, 'a', 'u2', 100, 'succeeded', 6, 6), ('p-twice', 'g2', NULL, 'a', 'u2', 100, 'refund_pending', 6, 6),
			('p-late', 'g3', NULL, 'a', 'u3', 100, 'refunded', 7, 7)`,
		`INSERT INTO order_events (event_id, type, order_token, order_id, activity_id, user_id, amount_cents, status, reason, at_ms,
			payment_id) VALUES ('g2.created', 'order.created', 'g2', 2, 'a', 'u2', 100, 'CREATED', '', 6, ''),
			('g2.paid', 'order.paid', 'g2', 2, 'a', 'u2', 100, 'PAID', '', 6, 'p-kept')`,
		`INSERT INTO event_deliveries (sink, event_id, order_token, state, attempts, next_at, last_error, delivered_at)
			VALUES ('hook', 'g2.created', 'g2', 'delivered', 1, 6, '', 6), ('hook', 'g2.paid', 'g2', 'pending', 0, 6, '', 0)`,
	} {
		if _, err := old.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	old.Close()

	s, err := Open(ctx, "sqlite:"+path)
	if err != nil {
		t.Fatalf("migrating a version 15 database: %v", err)
	}
	defer s.Close()
	type row struct {
		State    sale.PaymentState
		Received int64
		Reason   sale.RefundReason
	}
	got := map[string]row{}
	ps, err := s.Payments(ctx, sale.PaymentFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		got[p.ID] = row{p.State, p.ReceivedCents, p.RefundReason}
	}
	want := map[string]row{
		"p-started": {sale.PaymentStarted, 0, ""},
		"p-failed":  {sale.PaymentFailed, 0, ""},
		"p-kept":    {sale.PaymentSucceeded, 100, ""},
		"p-twice":   {sale.PaymentRefundPending, 100, sale.RefundPaidTwice},
		"p-late":    {sale.PaymentRefunded, 100, sale.RefundOrderClosed},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("the payments migrated (-want +got):\n%s", diff)
	}
	// Migration 17: the events of payments written before say what was taken, their order's amount.
	ds, err := s.Deliveries(ctx, sale.DeliveryFilter{Sink: "hook", Limit: 10})
	if err != nil || len(ds) != 2 || ds[0].PaymentID != "p-kept" || ds[0].ReceivedCents != 100 || ds[1].ReceivedCents != 0 {
		t.Fatalf("the events migrated: %+v, %v; want g2.paid of p-kept, 100 cents received, and g2.created of none", ds, err)
	}
	if p, err := s.StartPayment(ctx, "g1", "p-again", "signed", time.UnixMilli(10)); err != nil || p.ID != "p-started" {
		t.Fatalf("a click on g1's pay after the rebuild: %+v, %v; want its open payment, p-started", p, err)
	}
	if st, err := s.Settle(ctx, sale.PaymentNotice{PaymentID: "p-lost", OrderToken: "g-lost", AmountCents: 100,
		Outcome: sale.OutcomeSucceeded}, t0); err != nil || st.Payment.State != sale.PaymentRefundPending {
		t.Fatalf("money taken for an order the database does not have: %+v, %v", st, err)
	}
	if _, err := s.w.ExecContext(ctx, `INSERT INTO orders (token, activity_id, user_id, idem_key, slot, share_idx, amount_cents,
		status, reason, created_at, expires_at) VALUES ('g5', 'nope', 'u9', '', 1, 0, 100, 'CREATED', '', 9, 60009)`); err == nil {
		t.Fatal("an order of no activity went in: the foreign keys do not hold")
	}
}

func dumpOrders(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT id, token, activity_id, user_id, idem_key, IFNULL(slot, -1), share_idx, amount_cents, status,
		reason, created_at, expires_at, closed_at FROM orders ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		v := make([]any, 13)
		for i := range v {
			v[i] = new(any)
		}
		if err := rows.Scan(v...); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, x := range v {
			fmt.Fprintf(&b, "%v|", *(x.(*any)))
		}
		out = append(out, b.String())
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// testPlacementKeepsItsStatements: on SQLite the statements a batch of new orders runs are
// prepared once on the writer, before the first such batch, and the next batches of the same
// shape prepare nothing; the servers' writers keep none (each transaction prepares its own).
// The orders placed are the same as ever.
func testPlacementKeepsItsStatements(t *testing.T, dsn string) {
	s := openStore(t, dsn)
	create(t, s, item("a", 100, 1))
	if s.w.d != sqliteDialect {
		if s.w.stmts != nil {
			t.Fatal("a server's writer keeps statements")
		}
		ps := place(t, s, make8("a", 0)...)
		if len(ps) != 8 || !ps[7].New || ps[7].Order.Status != sale.StatusCreated {
			t.Fatalf("a lot of 8: %+v", ps)
		}
		return
	}
	held := func() int {
		s.w.stmts.mu.Lock()
		defer s.w.stmts.mu.Unlock()
		return len(s.w.stmts.m)
	}
	if n := held(); n != 0 {
		t.Fatalf("a new store holds %d statements", n)
	}
	place(t, s, make8("a", 0)...)
	first := held()
	if _, ok := s.w.stmts.m[insertLotQuery(s.w.d, 8)]; !ok || first == 0 {
		t.Fatalf("after a lot of 8: %d statements, the lot's INSERT among them: %v", first, ok)
	}
	ps := place(t, s, make8("a", 8)...)
	if n := held(); n != first {
		t.Fatalf("a second lot of 8 prepared %d statements more", n-first)
	}
	for i, pl := range ps {
		if !pl.New || pl.Order.Status != sale.StatusCreated || pl.Order.UserID != fmt.Sprint("u", 8+i) || pl.Order.ID == 0 {
			t.Fatalf("placement %d of the second lot: %+v", i, pl)
		}
	}
	var sold int64
	if err := s.r.QueryRowContext(context.Background(), `SELECT sold FROM activities WHERE id = 'a'`).Scan(&sold); err != nil || sold != 16 {
		t.Fatalf("sold %d of two lots of 8: %v", sold, err)
	}
}

// make8 makes the grabs of 8 new buyers of act, users from, from+1, ...
func make8(act string, from int) []sale.Grab {
	gs := make([]sale.Grab, 8)
	for i := range gs {
		gs[i] = grab(act, fmt.Sprint("u", from+i), 0)
	}
	return gs
}

// A writer holds at most its bound of statements; a lot whose INSERT finds no room is prepared in
// its transaction and placed as well.
func TestStatementsAreBounded(t *testing.T) {
	s := openStore(t, "sqlite:"+filepath.Join(t.TempDir(), "seckill.db"))
	ctx := context.Background()
	const bound = 8
	s.w.stmts.max = bound
	var qs []string
	for n := 1; n <= bound+4; n++ {
		qs = append(qs, insertLotQuery(s.w.d, n))
	}
	if err := s.w.stmts.prepare(ctx, qs...); err != nil {
		t.Fatal(err)
	}
	if n := len(s.w.stmts.m); n != bound {
		t.Fatalf("%d statements held, want the bound %d", n, bound)
	}
	create(t, s, item("a", 1000, 1))
	gs := make([]sale.Grab, 2*bound)
	for i := range gs {
		gs[i] = grab("a", fmt.Sprint("u", i), 0)
	}
	ps := place(t, s, gs...)
	for i, pl := range ps {
		if !pl.New || pl.Order.Status != sale.StatusCreated || pl.Order.ID == 0 {
			t.Fatalf("placement %d: %+v", i, pl)
		}
	}
	if n := len(s.w.stmts.m); n != bound {
		t.Fatalf("%d statements held after a lot beyond them", n)
	}
}

// A transaction holding SQLite's one writer connection gets its statements while another caller
// prepares new ones, which waits for that connection: preparing must not hold what the
// transaction needs.
func TestStatementsWhilePreparing(t *testing.T) {
	ctx := context.Background()
	// Opened and closed here, not with openStore: stuck, closing it would be stuck too.
	s, err := Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "seckill.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.w.stmts.prepare(ctx, readGuard); err != nil {
		t.Fatal(err)
	}
	inTx, prepared := make(chan struct{}), make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		done <- s.inTx(ctx, func(tx tx) error {
			close(inTx)
			time.Sleep(50 * time.Millisecond) // the other caller is now waiting for this connection
			st, owned, err := tx.prepared(ctx, readGuard)
			if err != nil || owned {
				return fmt.Errorf("the kept statement in a transaction: owned %v, %v", owned, err)
			}
			var kind string
			var limit, window int64
			if err := st.QueryRowContext(ctx, "none").Scan(&kind, &limit, &window); !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("the kept statement run: %v", err)
			}
			return nil
		})
	}()
	<-inTx
	go func() { prepared <- s.w.stmts.prepare(ctx, insertLotQuery(s.w.d, 5)) }()
	deadline := time.After(10 * time.Second)
	for range 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case err := <-prepared:
			if err != nil {
				t.Fatalf("prepare beside a transaction: %v", err)
			}
		case <-deadline:
			t.Fatal("a transaction and a prepare beside it are stuck on each other")
		}
	}
	defer s.Close()
	if _, ok := s.w.stmts.m[insertLotQuery(s.w.d, 5)]; !ok {
		t.Fatal("the statement prepared beside the transaction is not kept")
	}
}

// BenchmarkDeliverableBacklog reads the relay's next round (64 deliveries) from an outbox with a
// backlog of pending events: 5,000 orders created, every fourth paid too (its payment event
// waits behind its creation's), on each database. The relay is down while its lease runs out
// after a worker is killed, so a crowd leaves it such a backlog (the nemesis's Sentinel seed 227:
// rounds of 64 took 0.5 s, then 3, then every read ran past its 5 s deadline, and the relay never
// delivered again):
//
//	go test -run '^$' -bench DeliverableBacklog -benchtime 5x ./internal/sqlstore
func BenchmarkDeliverableBacklog(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			ctx := context.Background()
			s, err := Open(ctx, be.dsn(b))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			s.EmitTo("hook")
			if err := s.CreateActivity(ctx, item("a", sale.MaxStock, 1), nil); err != nil {
				b.Fatal(err)
			}
			const orders, batch = 5000, 250
			for n := range orders / batch {
				gs := make([]sale.Grab, batch)
				for i := range gs {
					gs[i] = grab("a", fmt.Sprint("u", n, "-", i), 0)
				}
				ps, err := s.PlaceOrders(ctx, gs)
				if err != nil {
					b.Fatal(err)
				}
				for i := 0; i < len(ps); i += 4 {
					if _, err := s.Pay(ctx, ps[i].Order.Token, t0.Add(2*time.Minute)); err != nil {
						b.Fatal(err)
					}
				}
			}
			now := t0.Add(3 * time.Minute)
			for b.Loop() {
				ds, err := s.Deliverable(ctx, "hook", now, 64)
				if err != nil || len(ds) != 64 {
					b.Fatalf("deliverable: %d, %v; want 64", len(ds), err)
				}
			}
		})
	}
}
