package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"seckill/internal/httpapi"
	"seckill/internal/sale"
	"seckill/internal/saletest"
	"seckill/internal/signature"
)

var paymentSecret = []byte("the payment provider's secret")

const checkout = "https://pay.example.com/checkout?shop=s1"

// newProviderFixture serves the API with a payment provider; its callbacks are signed on the
// real clock, as a provider's are, whatever clock the sale runs on.
func newProviderFixture(t testing.TB) *fixture {
	return newFixtureEnv(t, "", func(c *httpapi.Config, env saletest.Env) {
		u, _ := url.Parse(checkout)
		c.Payments = sale.NewPayments(env.Service, env.Store, nil, &signature.Provider{Secret: paymentSecret, CheckoutURL: u})
		c.Callback = &httpapi.Callback{Secret: paymentSecret}
		c.Admins = []httpapi.Admin{{Name: "grafana", Role: httpapi.RoleViewer, Token: viewerToken}}
	})
}

// callback posts body to the callback endpoint, signed with secret at at (no header for a nil
// secret).
func (f *fixture) callback(body string, secret []byte, at time.Time) response {
	f.t.Helper()
	if secret == nil {
		return f.do("POST", "/api/payments/callback", "", body)
	}
	return f.do("POST", "/api/payments/callback", "", body, signature.Header, signature.Sign(secret, at, []byte(body)))
}

func callbackBody(token, payment string, amount int64, status string) string {
	return fmt.Sprintf(`{"order_token":%q,"payment_id":%q,"amount_cents":%d,"status":%q}`, token, payment, amount, status)
}

// grabOrder takes a unit of activity id for user and waits for its order.
func (f *fixture) grabOrder(id, user string) string {
	f.t.Helper()
	r := f.do("POST", "/api/activities/"+id+"/grab", f.user(user), "")
	if r.status != http.StatusAccepted {
		f.t.Fatalf("grab: %d %s", r.status, r.raw)
	}
	token := r.body["order_token"].(string)
	f.waitStatus(user, token, sale.StatusCreated)
	return token
}

// TestPaymentsThroughAProvider: the pay call starts a payment and sends the buyer to the
// provider; only the provider's signed callback pays the order, once however often it calls; a
// forged, altered, old or wrong callback changes nothing; a payment that comes after the order
// was cancelled is given back, and an operator can record the refund.
func TestPaymentsThroughAProvider(t *testing.T) {
	f := newProviderFixture(t)
	id := f.create(strings.Replace(validItem, `"stock":2`, `"stock":3,"pay_window_s":60`, 1))
	alice, bob := f.grabOrder(id, "alice"), f.grabOrder(id, "bob")

	r := f.do("POST", "/api/orders/"+alice+"/pay", f.user("alice"), "")
	if r.status != http.StatusAccepted || r.body["status"] != "CREATED" {
		t.Fatalf("pay with a provider: %d %s; want 202 and the order still CREATED", r.status, r.raw)
	}
	p := r.body["payment"].(map[string]any)
	pid := p["payment_id"].(string)
	pay, err := url.Parse(p["pay_url"].(string))
	if err != nil || pay.Host != "pay.example.com" || pay.Query().Get("shop") != "s1" || pay.Query().Get("payment_id") != pid ||
		pay.Query().Get("order_token") != alice || pay.Query().Get("amount_cents") != "99900" || p["state"] != "started" {
		t.Fatalf("the payment %v: want the checkout page told of payment %s of %s, 99900 cents", p, pid, alice)
	}
	// What the URL asks the provider for is signed: a buyer who edits the amount is refused there.
	if err := signature.VerifyCheckout(paymentSecret, pay.Query()); err != nil {
		t.Fatalf("the checkout URL %s: %v, want it signed with the payment secret", pay, err)
	}
	edited := pay.Query()
	edited.Set("amount_cents", "100")
	if err := signature.VerifyCheckout(paymentSecret, edited); err == nil {
		t.Fatalf("the checkout URL with the amount edited verified")
	}
	if again := f.do("POST", "/api/orders/"+alice+"/pay", f.user("alice"), ""); again.status != http.StatusAccepted ||
		again.body["payment"].(map[string]any)["payment_id"] != pid {
		t.Fatalf("a second click: %d %s; want payment %s again", again.status, again.raw, pid)
	}

	now := time.Now()
	good := callbackBody(alice, pid, 99900, "succeeded")
	for _, bad := range []struct {
		name   string
		body   string
		secret []byte
		at     time.Time
		status int
		code   string
	}{
		{"unsigned", good, nil, now, 401, "BAD_SIGNATURE"},
		{"forged", good, []byte("a secret the provider never had"), now, 401, "BAD_SIGNATURE"},
		{"replayed after six minutes", good, paymentSecret, now.Add(-6 * time.Minute), 401, "SIGNATURE_EXPIRED"},
		// A failure takes no money: one that does not match the payment is refused. (A success
		// that does not match is money taken, owed back: TestMoneyTakenIsOwedBack.)
		{"a failure of a wrong amount", callbackBody(alice, pid, 1, "failed"), paymentSecret, now, 422, "AMOUNT_MISMATCH"},
		{"a failure of another order", callbackBody(bob, pid, 99900, "failed"), paymentSecret, now, 400, "INVALID_ARGUMENT"},
		{"a failure of an unknown payment", callbackBody(alice, "pay_nope", 99900, "failed"), paymentSecret, now, 404, "NOT_FOUND"},
		{"a refund of an unknown payment", callbackBody(alice, "pay_nope", 99900, "refunded"), paymentSecret, now, 404, "NOT_FOUND"},
		{"an unknown status", callbackBody(alice, pid, 99900, "pending"), paymentSecret, now, 400, "INVALID_ARGUMENT"},
		{"no amount", fmt.Sprintf(`{"order_token":%q,"payment_id":%q,"status":"succeeded"}`, alice, pid), paymentSecret, now, 400, "INVALID_ARGUMENT"},
		{"an unknown field", strings.Replace(good, `{`, `{"currency":"EUR",`, 1), paymentSecret, now, 400, "INVALID_ARGUMENT"},
		{"a refund of money never asked back", callbackBody(alice, pid, 99900, "refunded"), paymentSecret, now, 409, "INVALID_STATE"},
	} {
		if r := f.callback(bad.body, bad.secret, bad.at); r.status != bad.status || r.code() != bad.code {
			t.Errorf("%s: %d %s, want %d %s", bad.name, r.status, r.raw, bad.status, bad.code)
		}
	}
	// The status is refused before anything else the notice says (the service's one check).
	if r := f.callback(callbackBody(alice, "not an id", -1, "pending"), paymentSecret, now); r.status != 400 ||
		!strings.Contains(r.raw, "status must be succeeded, failed or refunded") {
		t.Errorf("an unknown status of a bad id and amount: %d %s", r.status, r.raw)
	}
	// An altered body under a good signature of the first.
	altered := strings.Replace(good, "99900", "99800", 1)
	if r := f.do("POST", "/api/payments/callback", "", altered, signature.Header, signature.Sign(paymentSecret, now, []byte(good))); r.status != 401 ||
		r.code() != "BAD_SIGNATURE" {
		t.Errorf("altered: %d %s", r.status, r.raw)
	}
	f.waitStatus("alice", alice, sale.StatusCreated) // none of them changed it

	r = f.callback(good, paymentSecret, now)
	if r.status != 200 || r.body["changed"] != true || r.body["order"].(map[string]any)["status"] != "PAID" ||
		r.body["payment"].(map[string]any)["state"] != "succeeded" {
		t.Fatalf("the callback: %d %s; want the order PAID", r.status, r.raw)
	}
	if r := f.callback(good, paymentSecret, now); r.status != 200 || r.body["changed"] != false {
		t.Fatalf("the callback again: %d %s; want 200, changed false", r.status, r.raw)
	}
	if r := f.callback(callbackBody(alice, pid, 99900, "failed"), paymentSecret, now); r.status != 409 || r.code() != "INVALID_STATE" {
		t.Errorf("a failure after the money came: %d %s", r.status, r.raw)
	}

	// bob pays too late: the sweeper cancels his order first, and his money goes back.
	r = f.do("POST", "/api/orders/"+bob+"/pay", f.user("bob"), "")
	bobPay := r.body["payment"].(map[string]any)["payment_id"].(string)
	f.clock.Advance(2 * time.Minute)
	if n, err := f.svc.SweepExpired(context.Background(), 10); err != nil || n != 1 {
		t.Fatalf("sweep = %d, %v; want bob's order", n, err)
	}
	r = f.callback(callbackBody(bob, bobPay, 99900, "succeeded"), paymentSecret, time.Now())
	if r.status != 200 || r.body["order"].(map[string]any)["status"] != "REFUND_PENDING" ||
		r.body["payment"].(map[string]any)["state"] != "refund_pending" {
		t.Fatalf("a late payment: %d %s; want REFUND_PENDING", r.status, r.raw)
	}
	list := f.do("GET", "/api/admin/payments?state=refund_pending", viewerToken, "")
	if ps, _ := list.body["payments"].([]any); list.status != 200 || len(ps) != 1 || ps[0].(map[string]any)["payment_id"] != bobPay {
		t.Fatalf("refunds pending: %d %s; want bob's", list.status, list.raw)
	}
	if r := f.do("GET", "/api/admin/payments?state=lost", viewerToken, ""); r.status != 400 || r.code() != "INVALID_ARGUMENT" {
		t.Errorf("a bad state filter: %d %s", r.status, r.raw)
	}
	if r := f.do("GET", "/api/admin/payments?order_token="+alice+"&limit=1", adminToken, ""); r.status != 200 ||
		len(r.body["payments"].([]any)) != 1 {
		t.Errorf("alice's payments: %d %s", r.status, r.raw)
	}
	if r := f.do("POST", "/api/admin/payments/"+bobPay+"/refunded", viewerToken, ""); r.status != 403 {
		t.Errorf("a viewer records a refund: %d %s; want 403", r.status, r.raw)
	}
	if r := f.do("POST", "/api/admin/payments/"+pid+"/refunded", adminToken, ""); r.status != 409 || r.code() != "INVALID_STATE" {
		t.Errorf("a refund of alice's kept payment: %d %s; want 409", r.status, r.raw)
	}
	if r := f.do("POST", "/api/admin/payments/pay_nope/refunded", adminToken, ""); r.status != 404 {
		t.Errorf("a refund of no payment: %d %s; want 404", r.status, r.raw)
	}
	r = f.do("POST", "/api/admin/payments/"+bobPay+"/refunded", adminToken, "")
	if r.status != 200 || r.body["order"].(map[string]any)["status"] != "REFUNDED" || r.body["changed"] != true {
		t.Fatalf("the operator records bob's refund: %d %s", r.status, r.raw)
	}
	if r := f.do("POST", "/api/admin/payments/"+bobPay+"/refunded", adminToken, ""); r.status != 200 || r.body["changed"] != false {
		t.Errorf("recorded twice: %d %s", r.status, r.raw)
	}
	audit := f.do("GET", "/api/admin/audit", adminToken, "")
	if !strings.Contains(audit.raw, bobPay) {
		t.Errorf("the audit log does not name the refund of %s: %s", bobPay, audit.raw)
	}
	st := f.do("GET", "/api/admin/activities/"+id+"/stats", adminToken, "")
	if st.body["paid"] != 1.0 || st.body["refunded"] != 1.0 || st.body["refund_pending"] != 0.0 || st.body["remaining"] != 2.0 {
		t.Errorf("stats: %s; want 1 paid, 1 refunded, 2 remaining (bob's unit back on sale)", st.raw)
	}
}

// TestMoneyTakenIsOwedBack: a correctly signed notice of money taken that no order can keep is
// answered 200 (the provider stops sending it) and recorded as owed back, once however often it
// comes, listed among the refunds to make with what was received and why, and asked back by an
// order.refund_requested event when it is of an order of ours: another amount than the order's
// (the buyer edited the checkout URL and the provider charged it), a payment's notice naming
// another order, and payment ids we never issued, for an order of ours or for none. The order
// can still be paid; the refund, of what was received, closes the payment.
func TestMoneyTakenIsOwedBack(t *testing.T) {
	f := newProviderFixture(t)
	id := f.create(strings.Replace(validItem, `"stock":2`, `"stock":3`, 1))
	alice, bob := f.grabOrder(id, "alice"), f.grabOrder(id, "bob")
	start := func(user, token string) string {
		t.Helper()
		r := f.do("POST", "/api/orders/"+token+"/pay", f.user(user), "")
		if r.status != http.StatusAccepted {
			t.Fatalf("pay: %d %s", r.status, r.raw)
		}
		return r.body["payment"].(map[string]any)["payment_id"].(string)
	}
	owed := func(what string, r response, changed bool, received float64, reason, order string) {
		t.Helper()
		p, _ := r.body["payment"].(map[string]any)
		o, _ := r.body["order"].(map[string]any)
		if r.status != 200 || r.body["changed"] != changed || p["state"] != "refund_pending" || p["received_cents"] != received ||
			p["refund_reason"] != reason || (order == "") != (o == nil) || o != nil && o["status"] != order {
			t.Fatalf("%s: %d %s; want 200, changed %v, owed back (%s) %v cents, the order %q", what, r.status, r.raw, changed, reason,
				received, order)
		}
	}

	pid := start("alice", alice)
	for i := range 2 {
		owed("10.90 taken for a 9.90 order", f.callback(callbackBody(alice, pid, 109900, "succeeded"), paymentSecret, time.Now()),
			i == 0, 109900, "amount_mismatch", "CREATED")
	}
	bobs := start("bob", bob)
	owed("bob's payment naming alice's order", f.callback(callbackBody(alice, bobs, 99900, "succeeded"), paymentSecret, time.Now()),
		true, 99900, "order_mismatch", "CREATED")
	owed("a payment id never issued, of bob's order", f.callback(callbackBody(bob, "pay_never", 500, "succeeded"), paymentSecret,
		time.Now()), true, 500, "unknown_payment", "CREATED")
	for i := range 2 {
		owed("a payment id never issued, of an order we do not have", f.callback(callbackBody("g_lost", "pay_lost", 4200, "succeeded"),
			paymentSecret, time.Now()), i == 0, 4200, "unknown_payment", "")
	}

	list := f.do("GET", "/api/admin/payments?state=refund_pending", viewerToken, "")
	got := map[string]any{}
	for _, p := range list.body["payments"].([]any) {
		p := p.(map[string]any)
		got[p["payment_id"].(string)] = p["received_cents"]
	}
	if want := map[string]any{pid: 109900.0, bobs: 99900.0, "pay_never": 500.0, "pay_lost": 4200.0}; list.status != 200 ||
		!reflect.DeepEqual(got, want) {
		t.Fatalf("refunds pending: %d %v; want %v", list.status, got, want)
	}
	evs := f.do("GET", "/api/admin/deliveries?limit=100", viewerToken, "")
	asked := map[string]bool{}
	for _, d := range evs.body["deliveries"].([]any) {
		if d := d.(map[string]any); d["type"] == "order.refund_requested" {
			asked[d["payment_id"].(string)] = true
		}
	}
	if want := map[string]bool{pid: true, bobs: true, "pay_never": true}; !reflect.DeepEqual(asked, want) {
		t.Errorf("refunds asked by an event: %v; want %v (no order to tell of pay_lost)", asked, want)
	}

	// alice still pays her order, by a payment of its amount.
	again := start("alice", alice)
	if r := f.callback(callbackBody(alice, again, 99900, "succeeded"), paymentSecret, time.Now()); r.status != 200 ||
		r.body["order"].(map[string]any)["status"] != "PAID" {
		t.Fatalf("alice pays after all: %d %s", r.status, r.raw)
	}
	// A refund is of what was received.
	if r := f.callback(callbackBody(alice, pid, 99900, "refunded"), paymentSecret, time.Now()); r.status != 422 || r.code() != "AMOUNT_MISMATCH" {
		t.Errorf("a refund of 9.90 of the 10.90 taken: %d %s; want 422", r.status, r.raw)
	}
	if r := f.callback(callbackBody(alice, pid, 109900, "refunded"), paymentSecret, time.Now()); r.status != 200 ||
		r.body["payment"].(map[string]any)["state"] != "refunded" || r.body["order"].(map[string]any)["status"] != "PAID" {
		t.Errorf("the refund of 10.90: %d %s", r.status, r.raw)
	}
	for _, p := range []string{bobs, "pay_lost"} {
		if r := f.do("POST", "/api/admin/payments/"+p+"/refunded", adminToken, ""); r.status != 200 || r.body["changed"] != true ||
			r.body["payment"].(map[string]any)["state"] != "refunded" {
			t.Errorf("the operator records the refund of %s: %d %s", p, r.status, r.raw)
		}
	}
}

// TestNoProviderNoCallbacks: without a payment secret the pay call pays, and the callback
// route refuses everything, changing nothing.
func TestNoProviderNoCallbacks(t *testing.T) {
	f := newFixture(t, false)
	id := f.create(validItem)
	tok := f.grabOrder(id, "alice")
	body := callbackBody(tok, "pay_x", 99900, "succeeded")
	if r := f.callback(body, paymentSecret, time.Now()); r.status != 404 || r.code() != "NOT_FOUND" {
		t.Fatalf("a callback without a provider: %d %s", r.status, r.raw)
	}
	if r := f.do("POST", "/api/orders/"+tok+"/pay", f.user("alice"), ""); r.status != 200 || r.body["status"] != "PAID" {
		t.Fatalf("pay without a provider: %d %s", r.status, r.raw)
	}
}

// FuzzPaymentCallback sends arbitrary bodies and signature headers to the callback: the answer
// is always one of its documented statuses with an error code, and a body the fuzzer could not
// sign never pays the order.
func FuzzPaymentCallback(f *testing.F) {
	fx := newProviderFixture(f)
	id := fx.create(validItem)
	tok := fx.grabOrder(id, "alice")
	r := fx.do("POST", "/api/orders/"+tok+"/pay", fx.user("alice"), "")
	pid := r.body["payment"].(map[string]any)["payment_id"].(string)
	good := callbackBody(tok, pid, 99900, "succeeded")
	f.Add(good, "")
	f.Add(good, "t=1,v1=00")
	f.Add(good, signature.Sign([]byte("another secret"), time.Now(), []byte(good)))
	f.Add("{}", "t=1")
	f.Add("\xff", ",,,=")
	f.Fuzz(func(t *testing.T, body, header string) {
		fx.t = t
		r := fx.do("POST", "/api/payments/callback", "", body, signature.Header, header)
		if r.status != 401 && r.status != 413 || r.code() == "" {
			t.Fatalf("body %q, header %q: %d %s; want 401 (or 413) with a code", body, header, r.status, r.raw)
		}
		if o, err := fx.svc.Order(context.Background(), "alice", tok); err != nil || o.Status != sale.StatusCreated {
			t.Fatalf("an unsigned callback changed the order: %v, %v", o.Status, err)
		}
	})
}
