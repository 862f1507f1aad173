package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"seckill/internal/dbtest"
	"seckill/internal/redistest"
	"seckill/internal/relay"
	"seckill/internal/signature"

	"seckill/internal/e2etest"
)

// TestWebhooksReceiveTheOrderEvents runs a node with a webhook receiver on loopback that checks
// every signature, answers 503 to its first three posts and drops what it has seen, as a shop's
// would: each order's events arrive, signed, in the order they happened, and the admin API shows
// them delivered.
func TestWebhooksReceiveTheOrderEvents(t *testing.T) {
	const secret = "the shop's webhook secret"
	var mu sync.Mutex
	seen := map[string][]string{} // order token -> event types
	ids := map[string]bool{}
	posts, forged := 0, 0
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if signature.Verify([]byte(secret), r.Header.Get(signature.Header), body, time.Now(), signature.Tolerance) != nil {
			forged++
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if posts++; posts <= 3 {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		var e relay.Message
		if err := json.Unmarshal(body, &e); err != nil || e.ID != r.Header.Get("Seckill-Event-Id") {
			http.Error(w, "bad event", http.StatusBadRequest)
			return
		}
		if !ids[e.ID] {
			ids[e.ID] = true
			seen[e.Order.Token] = append(seen[e.Order.Token], e.Type)
		}
	}))
	t.Cleanup(rc.Close)
	base := startRun(t, testEnv(sqliteDSN(t), "SECKILL_WEBHOOK_URL", rc.URL+"/hook", "SECKILL_WEBHOOK_SECRET", secret))
	c := newClient(t, base)
	id := c.CreateItem(5, 1, time.Minute)
	tokens := map[string]string{}
	for _, u := range []string{"alice", "bob", "carol"} {
		tokens[u] = c.Must("POST", "/api/activities/"+id+"/grab", c.Token(u), "", http.StatusAccepted)["order_token"].(string)
	}
	c.Drained(id)
	c.Must("POST", "/api/orders/"+tokens["alice"]+"/pay", c.Token("alice"), "", http.StatusOK)
	c.Must("POST", "/api/orders/"+tokens["bob"]+"/cancel", c.Token("bob"), "", http.StatusOK)

	want := map[string][]string{
		tokens["alice"]: {"order.created", "order.paid"},
		tokens["bob"]:   {"order.created", "order.cancelled"},
		tokens["carol"]: {"order.created"},
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		done := len(ids) == 5
		got := map[string][]string{}
		for k, v := range seen {
			got[k] = slices.Clone(v)
		}
		mu.Unlock()
		if done {
			for tok, w := range want {
				if !slices.Equal(got[tok], w) {
					t.Errorf("order %s: %v, want %v", tok, got[tok], w)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s the receiver has %v; want %v", got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if forged != 0 {
		t.Errorf("%d posts failed their signature", forged)
	}
	// The relay records a delivery after the receiver's answer: wait for the last record.
	for {
		ds := c.Must("GET", "/api/admin/deliveries?state=delivered", testAdmin, "", http.StatusOK)["deliveries"].([]any)
		if len(ds) == 5 {
			for _, d := range ds {
				if d.(map[string]any)["sink"] != rc.URL+"/hook" {
					t.Errorf("delivery %v", d)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivered: %v", ds)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDeliveredEventsArePurged runs a node with SECKILL_EVENTS_KEEP=1s and a receiver that takes
// every event but bob's: the events it took leave the outbox, with their deliveries, a second
// after; bob's, which it has not taken, stays, and the orders themselves are untouched.
func TestDeliveredEventsArePurged(t *testing.T) {
	const secret = "the shop's webhook secret"
	var mu sync.Mutex
	took := map[string]bool{} // event ids
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e relay.Message
		if err := json.NewDecoder(r.Body).Decode(&e); err != nil || e.Order.User == "bob" {
			http.Error(w, "not now", http.StatusServiceUnavailable)
			return
		}
		mu.Lock()
		took[e.ID] = true
		mu.Unlock()
	}))
	t.Cleanup(rc.Close)
	base := startRun(t, testEnv(sqliteDSN(t), "SECKILL_WEBHOOK_URL", rc.URL+"/hook", "SECKILL_WEBHOOK_SECRET", secret,
		"SECKILL_EVENTS_KEEP", "1s"))
	c := newClient(t, base)
	id := c.CreateItem(5, 1, time.Minute)
	tokens := map[string]string{}
	for _, u := range []string{"alice", "bob", "carol"} {
		tokens[u] = c.Must("POST", "/api/activities/"+id+"/grab", c.Token(u), "", http.StatusAccepted)["order_token"].(string)
	}
	c.Drained(id)
	c.Must("POST", "/api/orders/"+tokens["alice"]+"/pay", c.Token("alice"), "", http.StatusOK)

	deliveries := func() []any {
		t.Helper()
		return c.Must("GET", "/api/admin/deliveries", testAdmin, "", http.StatusOK)["deliveries"].([]any)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(took)
		mu.Unlock()
		ds := deliveries()
		if n == 3 && len(ds) == 1 {
			d := ds[0].(map[string]any)
			if d["event_id"] != tokens["bob"]+".created" || d["state"] != "pending" {
				t.Fatalf("left in the outbox: %v; want bob's creation, pending", d)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s the receiver took %d events (want 3) and the outbox holds %v (want bob's creation alone)", n, ds)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if o := c.Must("GET", "/api/orders/"+tokens["alice"], c.Token("alice"), "", http.StatusOK); o["status"] != "PAID" {
		t.Fatalf("alice's order after the purge of its events: %v", o)
	}
}

// TestKafkaReceivesTheOrderEvents runs a node that produces its order events to franz-go's
// in-process Kafka-protocol broker (no Kafka can be installed here): an order's events are on
// the topic, keyed by its token, in order.
func TestKafkaReceivesTheOrderEvents(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "shop.orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	base := startRun(t, testEnv(sqliteDSN(t), "SECKILL_KAFKA_BROKERS", strings.Join(cluster.ListenAddrs(), ","),
		"SECKILL_KAFKA_TOPIC", "shop.orders"))
	c := newClient(t, base)
	id := c.CreateItem(5, 1, time.Minute)
	token := c.Must("POST", "/api/activities/"+id+"/grab", c.Token("alice"), "", http.StatusAccepted)["order_token"].(string)
	c.Drained(id)
	c.Must("POST", "/api/orders/"+token+"/pay", c.Token("alice"), "", http.StatusOK)

	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("shop.orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var types []string
	for len(types) < 2 && ctx.Err() == nil {
		cl.PollRecords(ctx, 10).EachRecord(func(r *kgo.Record) {
			var m relay.Message
			if err := json.Unmarshal(r.Value, &m); err != nil || string(r.Key) != token || m.Order.Token != token {
				t.Errorf("record %s: %s (%v)", r.Key, r.Value, err)
			}
			types = append(types, m.Type)
		})
	}
	if !slices.Equal(types, []string{"order.created", "order.paid"}) {
		t.Fatalf("the topic holds %v; want the order's creation, then its payment", types)
	}
}

// TestKillNineTheRelayMidDelivery kills the node with SIGKILL while its relay has posts in
// flight that the receiver has taken but not yet answered, and starts it again on the same
// database: every event arrives at least once (those in flight twice, with the same id), and
// each order's in the order they happened.
func TestKillNineTheRelayMidDelivery(t *testing.T) {
	const secret, held = "the shop's webhook secret", 3
	var mu sync.Mutex
	seen := map[string][]string{} // order token -> event types, first deliveries only
	times := map[string]int{}     // event id -> deliveries
	release := make(chan struct{})
	holding := 0
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var e relay.Message
		if signature.Verify([]byte(secret), r.Header.Get(signature.Header), body, time.Now(), signature.Tolerance) != nil ||
			json.Unmarshal(body, &e) != nil {
			http.Error(w, "bad event", http.StatusBadRequest)
			return
		}
		mu.Lock()
		if times[e.ID]++; times[e.ID] == 1 {
			seen[e.Order.Token] = append(seen[e.Order.Token], e.Type)
		}
		hold := holding < held
		if hold {
			holding++
		}
		mu.Unlock()
		if hold { // taken, never answered: the node dies first
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
	}))
	t.Cleanup(rc.Close)
	t.Cleanup(func() { closeOnce(release) })
	env := testEnv(sqliteDSN(t), "SECKILL_WEBHOOK_URL", rc.URL+"/hook", "SECKILL_WEBHOOK_SECRET", secret)
	first := e2etest.StartChild(t, env)
	c := newClient(t, first.Base)
	id := c.CreateItem(10, 1, time.Minute)
	users := []string{"u0", "u1", "u2", "u3", "u4", "u5"}
	tokens := map[string]string{}
	for _, u := range users {
		tokens[u] = c.Must("POST", "/api/activities/"+id+"/grab", c.Token(u), "", http.StatusAccepted)["order_token"].(string)
	}
	c.Drained(id)
	for i, u := range users {
		if i%2 == 0 {
			c.Must("POST", "/api/orders/"+tokens[u]+"/pay", c.Token(u), "", http.StatusOK)
		} else {
			c.Must("POST", "/api/orders/"+tokens[u]+"/cancel", c.Token(u), "", http.StatusOK)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n := holding
		mu.Unlock()
		if n == held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s the receiver holds %d posts; want %d", n, held)
		}
		time.Sleep(10 * time.Millisecond)
	}
	first.Kill()
	closeOnce(release)
	e2etest.StartChild(t, env) // the same database, a new relay

	deadline = time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		got := map[string][]string{}
		for k, v := range seen {
			got[k] = slices.Clone(v)
		}
		again := 0
		for _, n := range times {
			again += n - 1
		}
		distinct := len(times)
		mu.Unlock()
		if distinct == 2*len(users) {
			for i, u := range users {
				want := []string{"order.created", "order.paid"}
				if i%2 == 1 {
					want[1] = "order.cancelled"
				}
				if !slices.Equal(got[tokens[u]], want) {
					t.Errorf("order of %s: %v, want %v", u, got[tokens[u]], want)
				}
			}
			if again < held {
				t.Errorf("%d events delivered again after the kill; the %d held in flight must be", again, held)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after the restart the receiver has %d distinct events (%v); want %d", distinct, got, 2*len(users))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var closeMu sync.Mutex

// closeOnce closes ch unless it is closed already.
func closeOnce(ch chan struct{}) {
	closeMu.Lock()
	defer closeMu.Unlock()
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// TestPaymentProviderEndToEnd runs a node with a payment provider and a webhook receiver: the
// pay call sends the buyer to the provider's page; the provider's signed callback pays one
// order; the other's comes after the sweeper closed its window, and is asked back; a third's
// takes another amount than its order's, and is asked back too. The receiver hears each order's
// events in order, the payment named in them with what it took.
func TestPaymentProviderEndToEnd(t *testing.T) {
	const hookSecret, paySecret = "the shop's webhook secret", "the provider's callback secret"
	var mu sync.Mutex
	seen := map[string][]string{} // order token -> "type payment_id received_cents"
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var e relay.Message
		if signature.Verify([]byte(hookSecret), r.Header.Get(signature.Header), body, time.Now(), signature.Tolerance) != nil ||
			json.Unmarshal(body, &e) != nil {
			http.Error(w, "bad event", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		ev := e.Type + " " + e.PaymentID
		if e.ReceivedCents != nil {
			ev += fmt.Sprint(" ", *e.ReceivedCents)
		}
		if !slices.Contains(seen[e.Order.Token], ev) {
			seen[e.Order.Token] = append(seen[e.Order.Token], ev)
		}
	}))
	t.Cleanup(rc.Close)
	base := startRun(t, testEnv(sqliteDSN(t), "SECKILL_WEBHOOK_URL", rc.URL+"/hook", "SECKILL_WEBHOOK_SECRET", hookSecret,
		"SECKILL_PAYMENT_SECRET", paySecret, "SECKILL_PAYMENT_URL", "https://pay.test/checkout", "SECKILL_SWEEP_EVERY", "100ms"))
	c := newClient(t, base)
	id := c.CreateItem(5, 1, time.Second)
	alice := c.Must("POST", "/api/activities/"+id+"/grab", c.Token("alice"), "", http.StatusAccepted)["order_token"].(string)
	bob := c.Must("POST", "/api/activities/"+id+"/grab", c.Token("bob"), "", http.StatusAccepted)["order_token"].(string)
	carol := c.Must("POST", "/api/activities/"+id+"/grab", c.Token("carol"), "", http.StatusAccepted)["order_token"].(string)
	c.Drained(id)
	payment := func(user, token string) (id, payURL string) {
		o := c.Must("POST", "/api/orders/"+token+"/pay", c.Token(user), "", http.StatusAccepted)
		p := o["payment"].(map[string]any)
		return p["payment_id"].(string), p["pay_url"].(string)
	}
	alicePay, payURL := payment("alice", alice)
	if !strings.HasPrefix(payURL, "https://pay.test/checkout?") || !strings.Contains(payURL, "payment_id="+alicePay) {
		t.Fatalf("pay_url %q", payURL)
	}
	bobPay, _ := payment("bob", bob)
	callback := func(token, pid, status string, amount ...int) map[string]any {
		cents := append(amount, 100)[0]
		body := fmt.Sprintf(`{"order_token":%q,"payment_id":%q,"amount_cents":%d,"status":%q}`, token, pid, cents, status)
		req, _ := http.NewRequest("POST", base+"/api/payments/callback", strings.NewReader(body))
		req.Header.Set(signature.Header, signature.Sign([]byte(paySecret), time.Now(), []byte(body)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("callback %s: %d %v %v", status, resp.StatusCode, m, err)
		}
		return m
	}
	if o := callback(alice, alicePay, "succeeded")["order"].(map[string]any); o["status"] != "PAID" {
		t.Fatalf("alice's order after the callback: %v", o)
	}
	// The provider takes 1.50 for carol's 1.00: owed back (her order expires meanwhile or after).
	carolPay, _ := payment("carol", carol)
	if p := callback(carol, carolPay, "succeeded", 150)["payment"].(map[string]any); p["state"] != "refund_pending" {
		t.Fatalf("carol's payment of another amount: %v", p)
	}
	// bob's window (1 s) closes and the sweeper (every 100 ms) cancels his order first.
	deadline := time.Now().Add(20 * time.Second)
	for c.Must("GET", "/api/orders/"+bob, c.Token("bob"), "", http.StatusOK)["status"] != "CANCELLED" {
		if time.Now().After(deadline) {
			t.Fatal("the sweeper never cancelled bob's order")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if o := callback(bob, bobPay, "succeeded")["order"].(map[string]any); o["status"] != "REFUND_PENDING" {
		t.Fatalf("bob's late payment: %v", o)
	}
	if o := callback(bob, bobPay, "refunded")["order"].(map[string]any); o["status"] != "REFUNDED" {
		t.Fatalf("bob's refund: %v", o)
	}
	want := map[string][]string{
		alice: {"order.created ", "order.paid " + alicePay + " 100"},
		bob:   {"order.created ", "order.expired ", "order.refund_requested " + bobPay + " 100", "order.refunded " + bobPay + " 100"},
		carol: {"order.created ", "order.expired ", "order.refund_requested " + carolPay + " 150"}, // the last two in either order
	}
	for {
		mu.Lock()
		got := map[string][]string{alice: slices.Clone(seen[alice]), bob: slices.Clone(seen[bob]), carol: slices.Clone(seen[carol])}
		mu.Unlock()
		if len(got[carol]) == 3 {
			slices.Sort(got[carol][1:])
		}
		if len(got[alice]) == 2 && len(got[bob]) == 4 && len(got[carol]) == 3 {
			for tok, w := range want {
				if !slices.Equal(got[tok], w) {
					t.Errorf("order %s: events %v, want %v", tok, got[tok], w)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the receiver has %v; want %v", got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestKillNineMidPaymentCallbacks: the provider calls the node back for 120 payments, 16 at a
// time, and the node is killed with SIGKILL in the middle of them. The provider sends every
// notice again to the node restarted on the same database (it retries each until it is answered
// 200, and sends some it had an answer to again). Every payment is kept once: every order PAID,
// every payment succeeded with its amount, none owed back, and the receiver hears one
// order.paid per order, however many times its notice came.
func TestKillNineMidPaymentCallbacks(t *testing.T) {
	const hookSecret, paySecret, n = "the shop's webhook secret", "the provider's callback secret", 120
	var mu sync.Mutex
	paidEvents := map[string]map[string]bool{} // order token -> ids of its order.paid events
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var e relay.Message
		if signature.Verify([]byte(hookSecret), r.Header.Get(signature.Header), body, time.Now(), signature.Tolerance) != nil ||
			json.Unmarshal(body, &e) != nil {
			http.Error(w, "bad event", http.StatusBadRequest)
			return
		}
		if e.Type == "order.paid" {
			mu.Lock()
			if paidEvents[e.Order.Token] == nil {
				paidEvents[e.Order.Token] = map[string]bool{}
			}
			paidEvents[e.Order.Token][e.ID] = true
			mu.Unlock()
		}
	}))
	t.Cleanup(rc.Close)
	env := testEnv(sqliteDSN(t), "SECKILL_WEBHOOK_URL", rc.URL+"/hook", "SECKILL_WEBHOOK_SECRET", hookSecret,
		"SECKILL_PAYMENT_SECRET", paySecret, "SECKILL_PAYMENT_URL", "https://pay.test/checkout")
	first := e2etest.StartChild(t, env)
	c := newClient(t, first.Base)
	id := c.CreateItem(n, 1, 10*time.Minute)
	type notice struct{ user, token, payment string }
	notices := make([]notice, n)
	for i := range notices {
		user := fmt.Sprint("payer-", i)
		tok := c.Must("POST", "/api/activities/"+id+"/grab", c.Token(user), "", http.StatusAccepted)["order_token"].(string)
		notices[i] = notice{user: user, token: tok}
	}
	c.Drained(id)
	for i, nt := range notices {
		p := c.Must("POST", "/api/orders/"+nt.token+"/pay", c.Token(nt.user), "", http.StatusAccepted)["payment"].(map[string]any)
		notices[i].payment = p["payment_id"].(string)
	}
	send := func(base string, nt notice) (int, error) {
		body := fmt.Sprintf(`{"order_token":%q,"payment_id":%q,"amount_cents":100,"status":"succeeded"}`, nt.token, nt.payment)
		req, _ := http.NewRequest("POST", base+"/api/payments/callback", strings.NewReader(body))
		req.Header.Set(signature.Header, signature.Sign([]byte(paySecret), time.Now(), []byte(body)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}

	var answered atomic.Int64
	var once sync.Once
	work := make(chan notice)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for nt := range work {
				if status, err := send(first.Base, nt); err == nil && status == http.StatusOK && answered.Add(1) == 30 {
					once.Do(first.Kill) // the callbacks on their way meet the kill
				}
			}
		})
	}
	for _, nt := range notices {
		work <- nt
	}
	close(work)
	wg.Wait()
	once.Do(first.Kill)
	if a := answered.Load(); a < 30 || a >= n {
		t.Fatalf("%d callbacks answered before the kill: it did not strike mid-way", a)
	}

	second := e2etest.StartChild(t, env)
	c = newClient(t, second.Base)
	for _, nt := range notices { // the provider's retries, of every notice
		if status, err := send(second.Base, nt); err != nil || status != http.StatusOK {
			t.Fatalf("payment %s again after the restart: %d, %v; want 200", nt.payment, status, err)
		}
	}
	for _, nt := range notices {
		if o := c.Must("GET", "/api/orders/"+nt.token, c.Token(nt.user), "", http.StatusOK); o["status"] != "PAID" {
			t.Fatalf("order %s after the kill and the retries: %v; want PAID", nt.token, o["status"])
		}
	}
	owed := c.Must("GET", "/api/admin/payments?state=refund_pending", testAdmin, "", http.StatusOK)
	if ps, _ := owed["payments"].([]any); len(ps) != 0 {
		t.Fatalf("payments owed back after the retries: %v; want none (every notice came for its order, once paid)", ps)
	}
	if st := c.Stats(id); st["paid"] != float64(n) {
		t.Fatalf("stats %v; want %d paid", st, n)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		heard, twice := len(paidEvents), 0
		for _, ids := range paidEvents {
			if len(ids) > 1 {
				twice++
			}
		}
		mu.Unlock()
		if twice > 0 {
			t.Fatalf("%d orders with more than one order.paid event", twice)
		}
		if heard == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the receiver heard order.paid of %d orders of %d", heard, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWaveRemindersOutliveTheirWriter runs a node of the binary on Redis and PostgreSQL with a
// signed webhook receiver and a reservation sale of three waves four seconds apart whose
// reminders are written three seconds ahead (SECKILL_REMIND_BEFORE=3s). Once wave 1's reminder
// arrives a second node starts and the first is killed (-9), its leases with it: the second
// writes the reminders of waves 2 and 3 in their time and relays what the first left. Each
// reminder is written once (one event in the outbox), within the three seconds before its wave
// opens, arrives (at least once: a post the dead node made may be made again), and says the
// activity, the wave, its opening and its two reservers (six in three waves); the reservers then
// grab in their waves.
func TestWaveRemindersOutliveTheirWriter(t *testing.T) {
	t.Parallel() // mostly waits (leases, timers, processes): overlapped with the suite's other waits
	const secret, before, interval = "the shop's webhook secret", 3 * time.Second, 4 * time.Second
	var mu sync.Mutex
	reminders := map[string]relay.Message{}
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m relay.Message
		if signature.Verify([]byte(secret), r.Header.Get(signature.Header), body, time.Now(), signature.Tolerance) != nil ||
			json.Unmarshal(body, &m) != nil {
			http.Error(w, "bad event", http.StatusBadRequest)
			return
		}
		if m.Type == "activity.wave_opening" {
			mu.Lock()
			reminders[m.ID] = m
			mu.Unlock()
		}
	}))
	t.Cleanup(rc.Close)
	rs := redistest.Start(t, redistest.Options{})
	env := testEnv(dbtest.PostgresDSN(t), "SECKILL_REDIS", rs.URL(), "SECKILL_WEBHOOK_URL", rc.URL+"/hook",
		"SECKILL_WEBHOOK_SECRET", secret, "SECKILL_REMIND_BEFORE", before.String(), "SECKILL_RATE_USER", "0")
	first := e2etest.StartChild(t, env)
	c := newClient(t, first.Base)
	start := time.Now().Add(6 * time.Second).Truncate(time.Second)
	id := c.Must("POST", "/api/admin/activities", testAdmin, fmt.Sprintf(`{"name":"phone launch","kind":"item","stock":10,
		"price_cents":100,"start_at":%q,"end_at":%q,"admission":"reservation","waves":3,"wave_interval_s":%d}`,
		start.Format(time.RFC3339), start.Add(time.Minute).Format(time.RFC3339), int(interval/time.Second)), http.StatusCreated)["id"].(string)
	users := []string{"u1", "u2", "u3", "u4", "u5", "u6"}
	for _, u := range users {
		c.Must("POST", "/api/activities/"+id+"/reservations", c.Token(u), "", http.StatusCreated)
	}
	if time.Now().After(start.Add(-before)) {
		t.Fatalf("the six reservations took until %s, past wave 1's reminder at %s: the machine is too slow for this schedule",
			time.Now().Format(time.StampMilli), start.Add(-before).Format(time.StampMilli))
	}
	wait := func(n int, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			mu.Lock()
			have := len(reminders)
			mu.Unlock()
			if have >= n {
				return
			}
			if time.Now().After(deadline) {
				_, ds, _ := c.Call("GET", "/api/admin/deliveries?limit=100", testAdmin, "")
				t.Fatalf("%d reminders within %s; want %d; the outbox: %v", have, within, n, ds)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	wait(1, 10*time.Second)
	second := e2etest.StartChild(t, env)
	first.Kill()
	c = newClient(t, second.Base)
	wait(3, 30*time.Second) // the relay's lease outlives its dead holder by up to 15 s

	mu.Lock()
	for k := int64(1); k <= 3; k++ {
		opens := start.Add(time.Duration(k-1) * interval)
		m, ok := reminders[fmt.Sprintf("%s.wave_opening.%d", id, k)]
		switch {
		case !ok:
			t.Errorf("wave %d: no reminder; got %v", k, reminders)
		case m.Activity == nil || m.Activity.ID != id || m.Activity.Name != "phone launch" || m.Wave != k ||
			m.OpensAt == nil || !m.OpensAt.Equal(opens) || m.Reserved == nil || *m.Reserved != 2 || m.Order != nil:
			t.Errorf("wave %d's reminder: %+v (activity %+v); want wave %d of %s opening at %s with 2 reserved", k, m, m.Activity, k, id, opens)
		case !m.CreatedAt.Before(opens) || m.CreatedAt.Before(opens.Add(-before)):
			t.Errorf("wave %d's reminder written at %s; want within the %s before it opens at %s", k,
				m.CreatedAt.Format(time.StampMilli), before, opens.Format(time.StampMilli))
		}
	}
	mu.Unlock()
	ds := c.Must("GET", "/api/admin/deliveries?limit=100", testAdmin, "", http.StatusOK)["deliveries"].([]any)
	written := map[string]int{}
	for _, d := range ds {
		if d := d.(map[string]any); d["type"] == "activity.wave_opening" {
			written[d["event_id"].(string)]++
		}
	}
	if len(written) != 3 {
		t.Errorf("the outbox's reminders: %v; want one delivery of each of the 3 waves'", written)
	}
	for id, n := range written {
		if n != 1 {
			t.Errorf("reminder %s: %d deliveries; want 1", id, n)
		}
	}
	// The reservers grab in their waves (by the order of reservation: u1 and u2 first).
	for i, u := range users {
		deadline := time.Now().Add(30 * time.Second)
		for {
			status, body, err := c.Call("POST", "/api/activities/"+id+"/grab", c.Token(u), "")
			if err == nil && status == http.StatusAccepted {
				break
			}
			if err != nil || status != http.StatusTooEarly || time.Now().After(deadline) {
				t.Fatalf("reserver %d (%s) grabs: %d %v %v; want 202 in its wave", i+1, u, status, body, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if opens := start.Add(time.Duration(i/2) * interval); time.Now().Before(opens) {
			t.Errorf("%s's grab taken at %s, before its wave opened at %s", u, time.Now().Format(time.StampMilli), opens.Format(time.StampMilli))
		}
	}
}
