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
	"sync"
	"testing"
	"time"

	"seckill/internal/memory"
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
	srv    *httptest.Server
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
	drain(t, newRelay(t, s, rc, memory.NewLease(time.Now), "node-1"))
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
	r := newRelay(t, s, rc, memory.NewLease(time.Now), "node-1")
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
	lease := memory.NewLease(time.Now)
	first, second := newRelay(t, s, rc, lease, "node-1"), newRelay(t, s, rc, lease, "node-2")
	if n, err := first.Round(context.Background()); err != nil || n == 0 {
		t.Fatalf("the first node: %d, %v", n, err)
	}
	if n, err := second.Round(context.Background()); err != nil || n != 0 {
		t.Fatalf("the second node, the lease held by the first: sent %d, %v", n, err)
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
	drain(t, newRelay(t, &lossy{EventStore: s, lose: 5}, rc, memory.NewLease(time.Now), "node-1"))
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
