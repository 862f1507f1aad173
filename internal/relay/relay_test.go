package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill/internal/embedded"
	"seckill/internal/relay"
	"seckill/internal/sale"
	"seckill/internal/saletest"
	"seckill/internal/signature"
	"seckill/internal/sqlstore"
	"seckill/internal/webhook"
)

var secret = []byte("the relay test's webhook secret")

// receiver is a shop's webhook endpoint on loopback: it checks every signature and keeps the
// events it took, per order, in the order they came; fail says which events to answer 500.
type receiver struct {
	mu     sync.Mutex
	seen   map[string][]string // order token -> event types
	ids    map[string]int      // event id -> deliveries
	forged int
	fail   func(id string) bool
	// arrived is every post taken, in the order they came, duplicates too (event ids); delay,
	// when set, says how long to wait before answering the nth post (from 1).
	arrived []string
	delay   func(n int) time.Duration
	srv     *httptest.Server
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{seen: map[string][]string{}, ids: map[string]int{}, fail: func(string) bool { return false }}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if signature.Verify(secret, r.Header.Get(signature.Header), body, time.Now(), signature.Tolerance) != nil {
			rc.mu.Lock()
			rc.forged++
			rc.mu.Unlock()
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var e relay.Message
		if err := json.Unmarshal(body, &e); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		rc.arrived = append(rc.arrived, e.ID)
		if rc.delay != nil {
			d := rc.delay(len(rc.arrived))
			rc.mu.Unlock()
			time.Sleep(d)
			rc.mu.Lock()
		}
		defer rc.mu.Unlock()
		if rc.fail(e.ID) {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		if rc.ids[e.ID]++; rc.ids[e.ID] == 1 { // a receiver drops what it has seen
			rc.seen[e.Order.Token] = append(rc.seen[e.Order.Token], e.Type)
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) snapshot() (map[string][]string, map[string]int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	seen := map[string][]string{}
	for k, v := range rc.seen {
		seen[k] = slices.Clone(v)
	}
	ids := map[string]int{}
	for k, v := range rc.ids {
		ids[k] = v
	}
	return seen, ids
}

func openStore(t *testing.T, sinks ...string) *sqlstore.Store {
	t.Helper()
	s, err := sqlstore.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s.EmitTo(sinks...)
	return s
}

func newRelay(t *testing.T, s sale.EventStore, rc *receiver, lease sale.Lease, holder string) *relay.Relay {
	t.Helper()
	sink, err := webhook.New(rc.srv.URL+"/hook", secret)
	if err != nil {
		t.Fatal(err)
	}
	return &relay.Relay{Store: s, Sink: sink, Lease: lease, Holder: holder, Log: slog.New(slog.DiscardHandler),
		Backoff: func(int) time.Duration { return 0 }, Parallel: 4}
}

// drain runs rounds until one finds nothing due, at most 200.
func drain(t *testing.T, r *relay.Relay) {
	t.Helper()
	for range 200 {
		n, err := r.Round(context.Background())
		if err != nil {
			t.Logf("round: %v", err)
		}
		if n == 0 {
			return
		}
	}
	t.Fatal("200 rounds and still events due")
}

// TestRelayDeliversEveryEventInOrder: every event reaches the receiver, signed, and each order's
// in the order they happened, though four orders go at once.
func TestRelayDeliversEveryEventInOrder(t *testing.T) {
	rc := newReceiver(t)
	s := openStore(t, rc.srv.URL+"/hook")
	tokens := saletest.OrderChanges(t, s, 40)
	drain(t, newRelay(t, s, rc, embedded.NewLease(time.Now), "node-1"))
	seen, ids := rc.snapshot()
	for i, tok := range tokens {
		want := saletest.OrderChangeTypes(i)
		if !slices.Equal(seen[tok], want) {
			t.Errorf("order %s: %v, want %v", tok, seen[tok], want)
		}
	}
	if len(ids) != 80 || rc.forged != 0 {
		t.Errorf("%d distinct events, %d forged; want 80 and none", len(ids), rc.forged)
	}
	left, err := s.Deliveries(context.Background(), sale.DeliveryFilter{State: sale.DeliveryPending, Limit: 100})
	if err != nil || len(left) != 0 {
		t.Errorf("pending after the drain: %v, %v", left, err)
	}
}

// TestRelayRetriesParksAndReplays: a receiver that fails one order's creation holds that order's
// later event back; after MaxAttempts the event is parked (the other orders go on), and a replay
// once the receiver is fixed delivers both, in order.
func TestRelayRetriesParksAndReplays(t *testing.T) {
	rc := newReceiver(t)
	s := openStore(t, rc.srv.URL+"/hook")
	tokens := saletest.OrderChanges(t, s, 6)
	bad := sale.EventID(tokens[2], sale.EventCreated)
	rc.fail = func(id string) bool { return id == bad }
	r := newRelay(t, s, rc, embedded.NewLease(time.Now), "node-1")
	r.MaxAttempts = 3
	var parked []string
	r.Failed = func(d sale.EventDelivery, err error, park bool) {
		if park {
			parked = append(parked, d.ID)
		}
	}
	drain(t, r)
	seen, ids := rc.snapshot()
	if len(seen[tokens[2]]) != 0 || len(ids) != 10 || !slices.Equal(parked, []string{bad}) {
		t.Fatalf("with %s failing: order %v, %d events, parked %v; want nothing of it, the other 10, it parked", bad, seen[tokens[2]], len(ids), parked)
	}
	ds, err := s.Deliveries(context.Background(), sale.DeliveryFilter{State: sale.DeliveryParked, Limit: 10})
	if err != nil || len(ds) != 1 || ds[0].ID != bad || ds[0].Attempts != 3 || ds[0].LastError == "" {
		t.Fatalf("parked deliveries %+v, %v", ds, err)
	}
	rc.mu.Lock()
	rc.fail = func(string) bool { return false }
	rc.mu.Unlock()
	if _, err := s.Replay(context.Background(), ds[0].Sink, bad, time.Now()); err != nil {
		t.Fatal(err)
	}
	drain(t, r)
	seen, _ = rc.snapshot()
	if !slices.Equal(seen[tokens[2]], []string{"order.created", "order.paid"}) {
		t.Fatalf("after the replay: %v", seen[tokens[2]])
	}
}

// TestRelayOneNodeAtATime: two nodes relay the same sink; only the lease's holder sends.
func TestRelayOneNodeAtATime(t *testing.T) {
	rc := newReceiver(t)
	s := openStore(t, rc.srv.URL+"/hook")
	saletest.OrderChanges(t, s, 10)
	lease := embedded.NewLease(time.Now)
	first, second := newRelay(t, s, rc, lease, "node-1"), newRelay(t, s, rc, lease, "node-2")
	if n, err := first.Round(context.Background()); err != nil || n == 0 {
		t.Fatalf("the first node: %d, %v", n, err)
	}
	if n, err := second.Round(context.Background()); err != nil || n != 0 {
		t.Fatalf("the second node, the lease held by the first: sent %d, %v", n, err)
	}
}

// tracked is a node's sink that counts the posts it has in flight, and the posts that started
// while another node had one in flight.
type tracked struct {
	relay.Sink
	node string
	in   *inFlight
}

type inFlight struct {
	mu       sync.Mutex
	by       map[string]int // node -> posts in flight
	overlaps int
}

func (s tracked) Deliver(ctx context.Context, e sale.Event) error {
	s.in.mu.Lock()
	for node, n := range s.in.by {
		if node != s.node && n > 0 {
			s.in.overlaps++
		}
	}
	s.in.by[s.node]++
	s.in.mu.Unlock()
	defer func() {
		s.in.mu.Lock()
		s.in.by[s.node]--
		s.in.mu.Unlock()
	}()
	return s.Sink.Deliver(ctx, e)
}

// TestRelayKeepsItsLeaseThroughASlowRound: two nodes relay one sink whose receiver takes more
// than twice the lease's time to answer the first post. The node that took the lease keeps it
// for as long as its round lasts, so the two never post at once, and no event of an order
// arrives after a later event of the same order (a second node relaying from its own reading of
// the outbox would send an order's creation after the first node's payment of it).
func TestRelayKeepsItsLeaseThroughASlowRound(t *testing.T) {
	const ttl = 600 * time.Millisecond
	rc := newReceiver(t)
	rc.delay = func(n int) time.Duration {
		if n == 1 {
			return 5 * ttl / 2
		}
		return 0
	}
	s := openStore(t, rc.srv.URL+"/hook")
	tokens := saletest.OrderChanges(t, s, 8)
	lease := embedded.NewLease(time.Now)
	in := &inFlight{by: map[string]int{}}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, node := range []string{"node-1", "node-2"} {
		r := newRelay(t, s, rc, lease, node)
		r.Sink, r.LeaseTTL, r.Parallel, r.Every = tracked{r.Sink, node, in}, ttl, 1, 10*time.Millisecond
		wg.Go(func() { r.Run(ctx) })
		time.Sleep(20 * time.Millisecond) // node-1 takes the lease
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, ids := rc.snapshot()
		if len(ids) == 2*len(tokens) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s the receiver has %d distinct events, want %d", len(ids), 2*len(tokens))
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(3 * ttl) // what a node still had to send
	stop()
	wg.Wait()

	in.mu.Lock()
	overlaps := in.overlaps
	in.mu.Unlock()
	if overlaps > 0 {
		t.Errorf("%d posts started while the other node had one in flight: two nodes relayed the sink at once", overlaps)
	}
	rc.mu.Lock()
	arrived := slices.Clone(rc.arrived)
	rc.mu.Unlock()
	rank := map[string]int{} // event id -> its place among its order's events
	for i, tok := range tokens {
		for k, typ := range saletest.OrderChangeTypes(i) {
			rank[sale.EventID(tok, sale.EventType(typ))] = k
		}
	}
	latest := map[string]int{} // order token -> the latest of its events arrived so far
	for _, id := range arrived {
		tok, _, _ := strings.Cut(id, ".")
		if k, ok := latest[tok]; ok && rank[id] < k {
			t.Errorf("%s arrived after a later event of its order (arrivals: %v)", id, arrived)
		}
		latest[tok] = max(latest[tok], rank[id])
	}
}

// fickle is a lease that its holder gets once and then never again: another node took it (err
// nil), or the lease store stopped answering (err).
type fickle struct {
	mu    sync.Mutex
	holds int
	err   error
}

func (l *fickle) Hold(context.Context, string, string, time.Duration) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holds++; l.holds == 1 {
		return true, nil
	}
	return false, l.err
}

// TestRelayStopsWhenItsLeaseIsLost: a round whose lease is taken by another node, or can no
// longer be extended, stops: its post in flight is cut off, the rest of what it read is not
// sent, and every event it did not deliver stays due, its attempts not counted.
func TestRelayStopsWhenItsLeaseIsLost(t *testing.T) {
	const ttl = 300 * time.Millisecond
	for _, tc := range []struct {
		name string
		err  error
	}{{"taken by another node", nil}, {"not extended", errors.New("redis: connection refused")}} {
		t.Run(tc.name, func(t *testing.T) {
			rc := newReceiver(t)
			rc.delay = func(int) time.Duration { return 5 * ttl }
			s := openStore(t, rc.srv.URL+"/hook")
			saletest.OrderChanges(t, s, 4)
			r := newRelay(t, s, rc, &fickle{err: tc.err}, "node-1")
			r.LeaseTTL, r.Parallel = ttl, 1
			start := time.Now()
			n, err := r.Round(context.Background())
			took := time.Since(start)
			if n != 4 || !errors.Is(err, relay.ErrLeaseLost) || took > 2*ttl {
				t.Errorf("round: %d tried, %v, in %s; want 4 read, ErrLeaseLost, within %s", n, err, took, 2*ttl)
			}
			rc.mu.Lock()
			arrived := slices.Clone(rc.arrived)
			rc.mu.Unlock()
			if len(arrived) != 1 {
				t.Errorf("posts sent: %v; want the first only, cut off", arrived)
			}
			ds, err := s.Deliveries(context.Background(), sale.DeliveryFilter{State: sale.DeliveryPending, Limit: 100})
			if err != nil || len(ds) != 8 {
				t.Fatalf("pending: %d, %v; want all 8", len(ds), err)
			}
			for _, d := range ds {
				if d.Attempts != 0 {
					t.Errorf("%s: %d attempts counted, want 0", d.ID, d.Attempts)
				}
			}
		})
	}
}

// lossy loses the record of the first deliveries it is told of, as a node killed between the
// receiver's answer and the database's write would.
type lossy struct {
	sale.EventStore
	mu   sync.Mutex
	lose int
}

func (l *lossy) Delivered(ctx context.Context, sink, id string, now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lose > 0 {
		l.lose--
		return errors.New("the node died before it wrote this down")
	}
	return l.EventStore.Delivered(ctx, sink, id, now)
}

// TestRelayDeliversAgainWhatItDidNotRecord: at least once: an event whose delivery was not
// recorded is sent again with the same id, and the receiver that drops what it has seen still
// sees each order's events once, in order.
func TestRelayDeliversAgainWhatItDidNotRecord(t *testing.T) {
	rc := newReceiver(t)
	s := openStore(t, rc.srv.URL+"/hook")
	tokens := saletest.OrderChanges(t, s, 8)
	drain(t, newRelay(t, &lossy{EventStore: s, lose: 5}, rc, embedded.NewLease(time.Now), "node-1"))
	seen, ids := rc.snapshot()
	again := 0
	for _, n := range ids {
		again += n - 1
	}
	if len(ids) != 16 || again != 5 {
		t.Fatalf("%d events, %d sent again; want 16 and 5", len(ids), again)
	}
	for _, tok := range tokens {
		if len(seen[tok]) != 2 || seen[tok][0] != "order.created" {
			t.Errorf("order %s: %v", tok, seen[tok])
		}
	}
}

func TestBackoff(t *testing.T) {
	for failures, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 5: 16 * time.Second, 30: 20 * time.Minute} {
		for range 50 {
			if d := relay.Backoff(failures); d < want/2 || d > want {
				t.Fatalf("Backoff(%d) = %s, want between %s and %s", failures, d, want/2, want)
			}
		}
	}
}
