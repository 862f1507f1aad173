package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"seckill/internal/auth"
	"seckill/internal/node"
	"seckill/internal/node/nodetest"
	"seckill/internal/openapitest"
	"seckill/internal/paytest"
	"seckill/internal/sale"
	"seckill/internal/saletest"
	"seckill/internal/servers"
	"seckill/internal/testtier"
)

// provider is one payment provider as a node's test drives it: how the node is configured for
// it, what the buyer does at its page, the notices it sends (signed as it signs them, or
// forged), what its answers mean and the refunds it made.
type provider interface {
	name() string
	configure(t testing.TB, c *node.Payments, dir string)
	// visit is the buyer arriving at payURL, the pay call's answer for payment p.
	visit(t *testing.T, payURL string, p sale.Payment)
	// paid is the provider's notice that it took cents for p; refunded, that it gave them back.
	paid(t *testing.T, p sale.Payment, cents int64) notice
	refunded(t *testing.T, p sale.Payment, cents int64) notice
	// forgeries are paid's notice for p forged or altered in the ways this provider's can be:
	// each must be refused with nothing changed.
	forgeries(t *testing.T, p sale.Payment) map[string]notice
	// taken says the answer to a notice is the provider's "taken": it stops sending it.
	taken(status int, body string) bool
	// refunds are the refunds the provider made: refund id -> cents.
	refunds() map[string]int64
}

// notice is what a provider posts to its route.
type notice struct {
	header      http.Header
	contentType string
	body        []byte
}

// providerSite is a node configured with one provider, its loops running as the binary's do
// (the refunds' relay among them), served on loopback: the providers post to its public URL.
type providerSite struct {
	t      testing.TB
	url    string
	env    saletest.Env
	node   *node.Node
	tokens *auth.Tokens
	pr     provider
	prs    []provider
}

// newProviderSite serves a node configured with the providers prs; the site's provider is the
// first.
func newProviderSite(t testing.TB, prs ...provider) *providerSite {
	pr := prs[0]
	var h atomic.Pointer[http.Handler]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*h.Load()).ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	clock := saletest.NewClock(saletest.T0)
	env, n := nodetest.Started(t, clock, func(c *node.Config) {
		c.API.AdminToken = adminToken
		c.Payments.PublicURL = srv.URL
		for _, p := range prs {
			c.Payments.Providers = append(c.Payments.Providers, p.name())
			p.configure(t, &c.Payments, t.TempDir())
		}
	})
	served := n.Handler()
	if _, fuzz := t.(*testing.F); !fuzz { // a fuzz target's exchanges report to its own t
		served = openapitest.Handler(t, served, openapitest.APIPath)
	}
	h.Store(&served)
	tokens, err := auth.New([]byte(nodetest.Secret), clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	return &providerSite{t: t, url: srv.URL, env: env, node: n, tokens: tokens, pr: pr, prs: prs}
}

func (s *providerSite) call(method, path, user, body string) (int, map[string]any) {
	s.t.Helper()
	req, _ := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if user != "" {
		tok, err := s.tokens.Mint(user, s.env.Clock.Now(), time.Hour)
		if err != nil {
			s.t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// order grabs a unit of a new item for user and returns its order, CREATED.
func (s *providerSite) order(user string) sale.Order {
	s.t.Helper()
	return s.orderIn(user, "")
}

// orderIn is order, the item's price in currency ("": the shop's).
func (s *providerSite) orderIn(user, currency string) sale.Order {
	s.t.Helper()
	ctx := context.Background()
	now := s.env.Clock.Now()
	a, err := s.env.Service.CreateActivity(ctx, sale.Activity{Name: "Phone X", Kind: sale.KindItem, Stock: 1, PriceCents: 990, Currency: currency,
		PerUserLimit: 1, StartAt: now, EndAt: now.Add(time.Hour), PayWindow: time.Minute, Admission: sale.AdmitDirect})
	if err != nil {
		s.t.Fatal(err)
	}
	status, body := s.call("POST", "/api/activities/"+a.ID+"/grab", user, "")
	if status != http.StatusAccepted {
		s.t.Fatalf("grab: %d %v", status, body)
	}
	token := body["order_token"].(string)
	return s.waitOrder(user, token, sale.StatusCreated)
}

func (s *providerSite) waitOrder(user, token string, want sale.Status) sale.Order {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		o, err := s.env.Service.Order(context.Background(), user, token)
		if err == nil && o.Status == want {
			return o
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("order %s: %+v, %v; want %s", token, o, err, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pay is the buyer's pay call at the site's provider: the payment started and where to pay it.
func (s *providerSite) pay(user string, o sale.Order) (sale.Payment, string) {
	s.t.Helper()
	status, body := s.call("POST", "/api/orders/"+o.Token+"/pay", user, fmt.Sprintf(`{"provider":%q}`, s.pr.name()))
	if status != http.StatusAccepted {
		s.t.Fatalf("pay: %d %v", status, body)
	}
	pm := body["payment"].(map[string]any)
	p, err := s.env.Payments.Payment(context.Background(), pm["payment_id"].(string))
	if err != nil {
		s.t.Fatal(err)
	}
	payURL, _ := pm["pay_url"].(string)
	if p.Provider != s.pr.name() || payURL == "" {
		s.t.Fatalf("the payment %+v, pay_url %q; want one at %s with its page", p, payURL, s.pr.name())
	}
	// A code URL to scan comes with its QR code, a PNG for the page to show; a page to go to
	// with none.
	qr, _ := pm["pay_qr"].(string)
	data, isQR := strings.CutPrefix(qr, "data:image/png;base64,")
	if scan := strings.HasPrefix(payURL, "weixin://"); scan != isQR {
		s.t.Errorf("pay_url %q with pay_qr %.40q", payURL, qr)
	} else if scan {
		raw, _ := base64.StdEncoding.DecodeString(data)
		if img, err := png.Decode(bytes.NewReader(raw)); err != nil || img.Bounds().Dx() < 200 {
			s.t.Errorf("pay_qr is no QR code's PNG: %v", err)
		}
	}
	return p, payURL
}

// post sends n to the provider's route and says whether the provider would take the answer.
func (s *providerSite) post(n notice) (bool, string) {
	s.t.Helper()
	status, body, err := paytest.Post(s.url+"/api/payments/"+s.pr.name(), n.contentType, n.header, n.body)
	if err != nil {
		s.t.Fatal(err)
	}
	return s.pr.taken(status, body), fmt.Sprintf("%d %q", status, body)
}

func (s *providerSite) payment(id string) sale.Payment {
	s.t.Helper()
	p, err := s.env.Payments.Payment(context.Background(), id)
	if err != nil {
		s.t.Fatal(err)
	}
	return p
}

// TestPaymentProviders: a node configured with each provider (keys generated for the test;
// Alipay's gateway and WeChat Pay's API faked, checking every signature the node sends; Stripe's
// API on stripe-mock) takes a buyer from the pay call to PAID through that provider's own notice,
// refuses every forged, altered or stale notice with nothing changed, takes a notice sent twice,
// or twice at once, once, owes back a payment of another amount and refunds a late payment
// through the provider's refund API by itself: its refunds' relay.
func TestPaymentProviders(t *testing.T) {
	for _, pr := range []provider{&alipayCase{}, &wechatCase{}, &stripeCase{}} {
		t.Run(pr.name(), func(t *testing.T) {
			if _, ok := pr.(*stripeCase); ok {
				testtier.NeedsServer(t, "stripe-mock")
			}
			providerMatrix(t, newProviderSite(t, pr))
		})
	}
}

func providerMatrix(t *testing.T, s *providerSite) {
	pr := s.pr
	if status, body := s.call("GET", "/api/payments/providers", "", ""); status != 200 || fmt.Sprint(body["providers"]) != "["+pr.name()+"]" {
		t.Errorf("the providers: %d %v; want [%s]", status, body, pr.name())
	}
	// Paid: two clicks, one payment and one page; the provider's notice pays the order.
	o := s.order("alice")
	p, payURL := s.pay("alice", o)
	if again, againURL := s.pay("alice", o); again.ID != p.ID || againURL != payURL {
		t.Errorf("a second click: payment %s at %q; want %s at %q", again.ID, againURL, p.ID, payURL)
	}
	pr.visit(t, payURL, p)
	for name, forged := range pr.forgeries(t, p) {
		if ok, answer := s.post(forged); ok {
			t.Errorf("%s: taken (%s)", name, answer)
		}
		if got := s.payment(p.ID); got.State != sale.PaymentStarted {
			t.Errorf("%s changed the payment: %+v", name, got)
		}
	}
	s.waitOrder("alice", o.Token, sale.StatusCreated)
	// A refund's notice before the payment's: refused, nothing changed (the provider sends it
	// again later).
	if ok, answer := s.post(pr.refunded(t, p, p.AmountCents)); ok {
		t.Errorf("a refund before the payment: taken (%s)", answer)
	}
	paid := pr.paid(t, p, p.AmountCents)
	var wg sync.WaitGroup
	for range 2 { // the same notice twice at once
		wg.Go(func() {
			if ok, answer := s.post(paid); !ok {
				t.Errorf("the paid notice: refused (%s)", answer)
			}
		})
	}
	wg.Wait()
	if ok, answer := s.post(paid); !ok { // and again later
		t.Errorf("the paid notice again: refused (%s)", answer)
	}
	s.waitOrder("alice", o.Token, sale.StatusPaid)
	if got := s.payment(p.ID); got.State != sale.PaymentSucceeded || got.ReceivedCents != p.AmountCents || got.ProviderRef == "" {
		t.Errorf("the payment: %+v; want succeeded, %d received, the provider's reference", got, p.AmountCents)
	}
	if st, err := s.env.Service.Stats(context.Background(), o.ActivityID); err != nil || st.Paid != 1 {
		t.Errorf("stats %+v, %v; want 1 paid", st, err)
	}

	// Another amount: taken (money is never dropped), owed back, and refunded by the node; the
	// order stays CREATED for the buyer to pay.
	o2 := s.order("bob")
	p2, url2 := s.pay("bob", o2)
	pr.visit(t, url2, p2)
	if ok, answer := s.post(pr.paid(t, p2, p2.AmountCents-1)); !ok {
		t.Errorf("a notice of another amount: refused (%s)", answer)
	}
	waitPayment(t, s, p2.ID, sale.PaymentRefunded)
	s.waitOrder("bob", o2.Token, sale.StatusCreated)

	// A late payment: the window closed and the sweeper cancelled the order; the money is owed
	// back and the node refunds it through the provider, once.
	o3 := s.order("carol")
	p3, url3 := s.pay("carol", o3)
	pr.visit(t, url3, p3)
	s.env.Clock.Advance(2 * time.Minute)
	if _, err := s.env.Service.SweepExpired(context.Background(), 100); err != nil {
		t.Fatal(err)
	}
	s.waitOrder("carol", o3.Token, sale.StatusCancelled)
	if ok, answer := s.post(pr.paid(t, p3, p3.AmountCents)); !ok {
		t.Errorf("a late payment's notice: refused (%s)", answer)
	}
	s.waitOrder("carol", o3.Token, sale.StatusRefunded)
	late := waitPayment(t, s, p3.ID, sale.PaymentRefunded)
	if late.RefundReason != sale.RefundOrderClosed {
		t.Errorf("the late payment: %+v; want refunded for order_closed", late)
	}
	refunds := pr.refunds()
	for _, q := range []sale.Payment{p2, p3} {
		want := q.AmountCents
		if q.ID == p2.ID {
			want--
		}
		if got, ok := refunds[sale.RefundID(q.ID)]; !ok || got != want {
			t.Errorf("the provider's refund of %s: %d, %v; want %d (refunds %v)", q.ID, got, ok, want, refunds)
		}
	}
	if len(refunds) != 2 {
		t.Errorf("the provider made %d refunds, want 2: %v", len(refunds), refunds)
	}
	// Money taken under a payment id never issued, naming no order: taken, owed back (an
	// operator's to refund: with no order of ours there is no event for the relay).
	stray := sale.Payment{ID: "pay_never_issued_" + pr.name(), AmountCents: 990}
	if ok, answer := s.post(pr.paid(t, stray, 990)); !ok {
		t.Errorf("a notice of a payment never issued: refused (%s)", answer)
	}
	if got := s.payment(stray.ID); got.State != sale.PaymentRefundPending || got.RefundReason != sale.RefundUnknownPayment ||
		got.ReceivedCents != 990 || got.Provider != pr.name() {
		t.Errorf("the payment never issued: %+v; want owed back, 990 received, of %s", got, pr.name())
	}
	// The provider's own notice of the refund, after the node recorded it: a repeat.
	if ok, answer := s.post(pr.refunded(t, p3, p3.AmountCents)); !ok {
		t.Errorf("the refund's notice: refused (%s)", answer)
	}
	if st, err := s.env.Service.Stats(context.Background(), o.ActivityID); err != nil || st.Paid != 1 {
		t.Errorf("stats %+v, %v; want 1 paid", st, err)
	}
}

// TestSeveralProviders: with several providers the buyer names one ({"provider":...}), the
// product page learns them from GET /api/payments/providers, and starting again at another
// closes the first payment; naming none, or one the node does not have, is refused.
func TestSeveralProviders(t *testing.T) {
	s := newProviderSite(t, &alipayCase{}, &wechatCase{})
	if status, body := s.call("GET", "/api/payments/providers", "", ""); status != 200 || fmt.Sprint(body["providers"]) != "[alipay wechatpay]" {
		t.Errorf("the providers: %d %v; want [alipay wechatpay], the default first", status, body)
	}
	o := s.order("alice")
	for _, body := range []string{"", `{}`, `{"provider":"stripe"}`, `{"provider":"paypal"}`, `{"provider":1}`} {
		status, answer := s.call("POST", "/api/orders/"+o.Token+"/pay", "alice", body)
		if e, _ := answer["error"].(map[string]any); status != http.StatusBadRequest || e["code"] != "INVALID_ARGUMENT" {
			t.Errorf("pay with %q: %d %v; want 400 INVALID_ARGUMENT", body, status, answer)
		}
	}
	first, _ := s.pay("alice", o) // at alipay
	status, answer := s.call("POST", "/api/orders/"+o.Token+"/pay", "alice", `{"provider":"wechatpay"}`)
	pm, _ := answer["payment"].(map[string]any)
	if status != http.StatusAccepted || pm["provider"] != "wechatpay" || pm["payment_id"] == first.ID {
		t.Fatalf("pay at wechatpay: %d %v; want a new payment there", status, answer)
	}
	if p := s.payment(first.ID); p.State != sale.PaymentFailed {
		t.Errorf("the first payment, at alipay: %+v; want failed (closed)", p)
	}
	payURL, _ := pm["pay_url"].(string)
	s.pr = s.prs[1]
	second := s.payment(pm["payment_id"].(string))
	s.pr.visit(t, payURL, second)
	if ok, answer := s.post(s.pr.paid(t, second, second.AmountCents)); !ok {
		t.Fatalf("wechatpay's notice: refused (%s)", answer)
	}
	s.waitOrder("alice", o.Token, sale.StatusPaid)
}

func waitPayment(t *testing.T, s *providerSite, id string, want sale.PaymentState) sale.Payment {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p := s.payment(id)
		if p.State == want {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("payment %s: %+v; want %s", id, p, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alipayCase is Alipay, on a fake gateway.
type alipayCase struct{ gw *paytest.Alipay }

func (*alipayCase) name() string { return "alipay" }

func (a *alipayCase) configure(t testing.TB, c *node.Payments, dir string) {
	appPriv, alipayPub, err := paytest.WriteKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	a.gw = paytest.StartAlipay("2021000000000001", &paytest.Key(0).PublicKey, paytest.Key(1))
	t.Cleanup(a.gw.Close)
	c.Alipay = node.Alipay{AppID: a.gw.AppID, PrivateKey: appPriv, PublicKey: alipayPub, Gateway: a.gw.URL()}
	t.Cleanup(func() {
		if r := a.gw.Refused(); len(r) > 0 {
			t.Errorf("the gateway refused calls the node signed: %v", r)
		}
	})
}

func (a *alipayCase) visit(t *testing.T, payURL string, p sale.Payment) {
	t.Helper()
	if !strings.HasPrefix(payURL, a.gw.URL()+"?") {
		t.Fatalf("pay_url %q is not the gateway's", payURL)
	}
	resp, err := http.Get(payURL)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	tr, ok := a.gw.Trade(p.ID)
	if resp.StatusCode != http.StatusOK || !ok || tr.Cents != p.AmountCents || tr.Passback != p.OrderToken ||
		!strings.HasSuffix(tr.NotifyURL, "/api/payments/alipay") {
		t.Fatalf("the gateway: %d, trade %+v (%v); want %s of %d cents, its order token passed back", resp.StatusCode, tr, ok, p.ID, p.AmountCents)
	}
}

func (a *alipayCase) form(f url.Values) notice {
	return notice{contentType: "application/x-www-form-urlencoded; charset=utf-8", body: []byte(f.Encode())}
}

func (a *alipayCase) paid(_ *testing.T, p sale.Payment, cents int64) notice {
	return a.form(a.gw.Notice(nil, p.ID, "TRADE_SUCCESS", cents, nil))
}

func (a *alipayCase) refunded(_ *testing.T, p sale.Payment, cents int64) notice {
	return a.form(a.gw.Notice(nil, p.ID, "TRADE_CLOSED", p.AmountCents, map[string]string{"refund_fee": yuan(cents)}))
}

func yuan(cents int64) string { return fmt.Sprintf("%d.%02d", cents/100, cents%100) }

func (a *alipayCase) forgeries(_ *testing.T, p sale.Payment) map[string]notice {
	good := a.gw.Notice(nil, p.ID, "TRADE_SUCCESS", p.AmountCents, nil)
	altered := url.Values{}
	for k, v := range good {
		altered[k] = v
	}
	altered.Set("total_amount", yuan(p.AmountCents+100)) // one byte of it: 9.90 -> 10.90
	unsigned := url.Values{}
	for k, v := range good {
		unsigned[k] = v
	}
	unsigned.Del("sign")
	return map[string]notice{
		"a byte changed":        a.form(altered),
		"another key":           a.form(a.gw.Notice(paytest.Key(2), p.ID, "TRADE_SUCCESS", p.AmountCents, nil)),
		"unsigned":              a.form(unsigned),
		"another app":           a.form(a.gw.Notice(nil, p.ID, "TRADE_SUCCESS", p.AmountCents, map[string]string{"app_id": "2021000000000002"})),
		"an amount not in yuan": a.form(a.gw.Notice(nil, p.ID, "TRADE_SUCCESS", p.AmountCents, map[string]string{"total_amount": "9.9"})),
	}
}

func (*alipayCase) taken(status int, body string) bool {
	return status == http.StatusOK && body == "success"
}

func (a *alipayCase) refunds() map[string]int64 { r, _ := a.gw.Refunds(); return r }

// wechatCase is WeChat Pay, on a fake API.
type wechatCase struct{ api *paytest.WeChatPay }

func (*wechatCase) name() string { return "wechatpay" }

const wechatKey = "0123456789abcdef0123456789abcdef" // the API v3 key: 32 bytes

func (w *wechatCase) configure(t testing.TB, c *node.Payments, dir string) {
	merchantPriv, platformPub, err := paytest.WriteKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	w.api = paytest.StartWeChatPay("1900000109", "wxd678efh567hg6787", "MERCHANT-SERIAL", &paytest.Key(0).PublicKey,
		"PUB_KEY_ID_0001", paytest.Key(1), []byte(wechatKey))
	w.api.ProcessFirst(1) // each refund is PROCESSING at first: the relay asks again
	t.Cleanup(w.api.Close)
	c.WeChatPay = node.WeChatPay{MchID: w.api.MchID, AppID: w.api.AppID, Serial: "MERCHANT-SERIAL", PrivateKey: merchantPriv,
		PlatformKey: platformPub, PlatformSerial: "PUB_KEY_ID_0001", APIv3Key: wechatKey, APIURL: w.api.URL()}
	t.Cleanup(func() {
		if r := w.api.Refused(); len(r) > 0 {
			t.Errorf("the API refused requests the node signed: %v", r)
		}
	})
}

func (w *wechatCase) visit(t *testing.T, payURL string, p sale.Payment) {
	t.Helper()
	o, ok := w.api.Order(p.ID)
	if !strings.HasPrefix(payURL, "weixin://wxpay/bizpayurl?pr=") || !ok || o.Kind != "native" || o.Cents != p.AmountCents ||
		o.Attach != p.OrderToken || !strings.HasSuffix(o.NotifyURL, "/api/payments/wechatpay") {
		t.Fatalf("pay_url %q, order %+v (%v); want a Native code URL of %s for %d cents", payURL, o, ok, p.ID, p.AmountCents)
	}
}

func (w *wechatCase) wx(h http.Header, body []byte) notice {
	return notice{header: h, contentType: "application/json", body: body}
}

func (w *wechatCase) paid(_ *testing.T, p sale.Payment, cents int64) notice {
	return w.wx(w.api.Notice(nil, time.Now(), "EV-"+p.ID, "TRANSACTION.SUCCESS", w.api.Paid(p.ID, cents)))
}

func (w *wechatCase) refunded(_ *testing.T, p sale.Payment, cents int64) notice {
	return w.wx(w.api.Notice(nil, time.Now(), "EV-R-"+p.ID, "REFUND.SUCCESS", w.api.Refunded(p.ID, sale.RefundID(p.ID), cents)))
}

func (w *wechatCase) forgeries(_ *testing.T, p sale.Payment) map[string]notice {
	h, body := w.api.Notice(nil, time.Now(), "EV-"+p.ID, "TRANSACTION.SUCCESS", w.api.Paid(p.ID, p.AmountCents))
	altered := append([]byte(nil), body...)
	altered[len(altered)-2] ^= 1
	unknown := h.Clone()
	unknown.Set("Wechatpay-Serial", "PUB_KEY_ID_9999")
	probe := h.Clone()
	probe.Set("Wechatpay-Signature", "WECHATPAY/SIGNTEST/"+h.Get("Wechatpay-Signature"))
	return map[string]notice{
		"a byte changed":    w.wx(h, altered),
		"another key":       w.wx(w.api.Notice(paytest.Key(2), time.Now(), "EV-"+p.ID, "TRANSACTION.SUCCESS", w.api.Paid(p.ID, p.AmountCents))),
		"an unknown serial": w.wx(unknown, body),
		"stale":             w.wx(w.api.Notice(nil, time.Now().Add(-6*time.Minute), "EV-"+p.ID, "TRANSACTION.SUCCESS", w.api.Paid(p.ID, p.AmountCents))),
		"a probe":           w.wx(probe, body),
	}
}

func (*wechatCase) taken(status int, _ string) bool { return status == http.StatusNoContent }

func (w *wechatCase) refunds() map[string]int64 { r, _ := w.api.Refunds(); return r }

// stripeCase is Stripe: its API on stripe-mock (which keeps nothing: the refunds the node asked
// for are read from its requests), its events signed with the endpoint's secret by stripe-go's
// own helper.
type stripeCase struct {
	mu         sync.Mutex
	keys       map[string]int // Idempotency-Key -> requests
	made       map[string]int64
	currencies map[string]string // payment id -> the currency its session asked for
}

func (*stripeCase) name() string { return "stripe" }

const stripeSecret = "whsec_test_secret_of_the_endpoint"

func (s *stripeCase) configure(t testing.TB, c *node.Payments, dir string) {
	mock, err := servers.StartStripeMock(dir)
	if err != nil {
		t.Fatalf("stripe-mock: %v", err)
	}
	t.Cleanup(mock.Stop)
	s.keys, s.made, s.currencies = map[string]int{}, map[string]int64{}, map[string]string{}
	c.Stripe = node.Stripe{SecretKey: "sk_test_123", WebhookSecret: stripeSecret, APIURL: mock.URL(), Currency: "usd"}
	c.HTTP = &http.Client{Timeout: 10 * time.Second, Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		s.mu.Lock()
		s.keys[r.Header.Get("Idempotency-Key")]++
		if r.URL.Path == "/v1/checkout/sessions" && r.Body != nil {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			f, _ := url.ParseQuery(string(body))
			s.currencies[f.Get("client_reference_id")] = f.Get("line_items[0][price_data][currency]")
		}
		if r.URL.Path == "/v1/refunds" && r.Body != nil {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			f, _ := url.ParseQuery(string(body))
			var cents int64
			fmt.Sscan(f.Get("amount"), &cents)
			s.made[f.Get("metadata[refund_id]")] = cents
		}
		s.mu.Unlock()
		return http.DefaultTransport.RoundTrip(r)
	})}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (s *stripeCase) visit(t *testing.T, payURL string, p sale.Payment) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	// Every click asked for the session under the payment's id as its key: Stripe makes one.
	if n := s.keys[p.ID]; n < 1 || !strings.HasPrefix(payURL, "https://") {
		t.Fatalf("pay_url %q; %d session requests under the payment's Idempotency-Key (%v)", payURL, n, s.keys)
	}
}

func event(typ string, object map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"id": "evt_" + typ, "object": "event", "type": typ, "api_version": "2025-08-27.basil",
		"created": time.Now().Unix(), "data": map[string]any{"object": object}})
	return b
}

func (s *stripeCase) signed(body []byte, secret string, at time.Time) notice {
	sig := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at}).Header
	h := http.Header{}
	h.Set("Stripe-Signature", sig)
	return notice{header: h, contentType: "application/json", body: body}
}

func (s *stripeCase) session(p sale.Payment, cents int64) []byte {
	return event("checkout.session.completed", map[string]any{"id": "cs_test_" + p.ID, "object": "checkout.session",
		"client_reference_id": p.ID, "metadata": map[string]string{"payment_id": p.ID, "order_token": p.OrderToken},
		"amount_total": cents, "payment_status": "paid", "payment_intent": "pi_" + p.ID})
}

func (s *stripeCase) paid(_ *testing.T, p sale.Payment, cents int64) notice {
	return s.signed(s.session(p, cents), stripeSecret, time.Now())
}

func (s *stripeCase) refunded(_ *testing.T, p sale.Payment, cents int64) notice {
	return s.signed(event("charge.refunded", map[string]any{"id": "ch_" + p.ID, "object": "charge", "amount_refunded": cents,
		"metadata": map[string]string{"payment_id": p.ID, "order_token": p.OrderToken}, "payment_intent": "pi_" + p.ID}),
		stripeSecret, time.Now())
}

func (s *stripeCase) forgeries(_ *testing.T, p sale.Payment) map[string]notice {
	good := s.paid(nil, p, p.AmountCents)
	altered := good
	altered.body = append([]byte(nil), good.body...)
	altered.body[len(altered.body)-3] ^= 1
	return map[string]notice{
		"a byte changed": altered,
		"another secret": s.signed(s.session(p, p.AmountCents), "whsec_another_endpoint", time.Now()),
		"stale":          s.signed(s.session(p, p.AmountCents), stripeSecret, time.Now().Add(-6*time.Minute)),
		"unsigned":       {contentType: "application/json", body: good.body},
	}
}

func (*stripeCase) taken(status int, _ string) bool { return status == http.StatusOK }

func (s *stripeCase) refunds() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int64{}
	for k, v := range s.made {
		out[k] = v
	}
	return out
}

// TestPhonesPayInTheirBrowser: a buyer on a phone's browser (its User-Agent) is sent to Alipay's
// wap.pay and WeChat Pay's H5 page, with their address; on a desktop to page.pay and a Native
// QR code.
func TestPhonesPayInTheirBrowser(t *testing.T) {
	ali, wx := &alipayCase{}, &wechatCase{}
	s := newProviderSite(t, ali, wx)
	const phone = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148"
	pay := func(user, provider, ua string) map[string]any {
		o := s.order(user)
		tok, err := s.tokens.Mint(user, s.env.Clock.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("POST", s.url+"/api/orders/"+o.Token+"/pay", strings.NewReader(fmt.Sprintf(`{"provider":%q}`, provider)))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("User-Agent", ua)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("pay at %s: %d %v", provider, resp.StatusCode, out)
		}
		return out["payment"].(map[string]any)
	}
	for _, tc := range []struct {
		user, ua, alipayMethod, wechatKind string
	}{
		{"phil", phone, "alipay.trade.wap.pay", "h5"},
		{"dora", "Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0", "alipay.trade.page.pay", "native"},
	} {
		p := pay(tc.user+"-a", "alipay", tc.ua)
		u, _ := url.Parse(p["pay_url"].(string))
		if m := u.Query().Get("method"); m != tc.alipayMethod {
			t.Errorf("%s at alipay: method %q, want %s", tc.user, m, tc.alipayMethod)
		}
		p = pay(tc.user+"-w", "wechatpay", tc.ua)
		o, ok := wx.api.Order(p["payment_id"].(string))
		_, qr := p["pay_qr"]
		if !ok || o.Kind != tc.wechatKind || qr != (tc.wechatKind == "native") {
			t.Errorf("%s at wechatpay: order %+v (%v), pay_url %v, a QR code %v; want a %s order", tc.user, o, ok, p["pay_url"], qr, tc.wechatKind)
		}
	}
}

// FuzzProviderNotices posts arbitrary bodies and signature headers to each provider's notice
// route of a node that has the three: every answer is the provider's refusal, never a 5xx, and
// no payment is ever recorded: what is not the provider's signed word changes nothing.
func FuzzProviderNotices(f *testing.F) {
	ali, wx := &alipayCase{}, &wechatCase{}
	for _, seed := range []struct {
		route uint8
		sig   string
		body  string
	}{
		{0, "", "trade_status=TRADE_SUCCESS&out_trade_no=pay_1&total_amount=9.90&app_id=2021000000000001&sign=AAAA&sign_type=RSA2"},
		{0, "", "%zz&&=="},
		{1, "WECHATPAY/SIGNTEST/abc", `{"id":"EV-1","event_type":"TRANSACTION.SUCCESS","resource":{"algorithm":"AEAD_AES_256_GCM","ciphertext":"AAAA","nonce":"n","associated_data":"transaction"}}`},
		{1, "", "{"},
		{2, "t=1764864000,v1=00", `{"id":"evt_1","type":"checkout.session.completed","data":{"object":{"client_reference_id":"pay_1"}}}`},
		{2, "t=abc", "\xff\xfe"},
	} {
		f.Add(seed.route, seed.sig, []byte(seed.body))
	}
	s := newProviderSite(f, ali, wx, stripeNotices{&stripeCase{}})
	routes := []string{"alipay", "wechatpay", "stripe"}
	f.Fuzz(func(t *testing.T, route uint8, sig string, body []byte) {
		name := routes[int(route)%len(routes)]
		if strings.ContainsFunc(sig, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
			t.Skip("no HTTP client sends such a header")
		}
		h := http.Header{}
		switch name {
		case "wechatpay":
			h.Set("Wechatpay-Serial", "PUB_KEY_ID_0001")
			h.Set("Wechatpay-Timestamp", fmt.Sprint(time.Now().Unix()))
			h.Set("Wechatpay-Nonce", "n")
			h.Set("Wechatpay-Signature", sig)
		case "stripe":
			h.Set("Stripe-Signature", sig)
		}
		status, answer, err := paytest.Post(s.url+"/api/payments/"+name, "application/octet-stream", h, body)
		if err != nil {
			t.Fatal(err)
		}
		refused := map[string]bool{"alipay": status == 200 && answer == "failure", "wechatpay": status == 400, "stripe": status == 400}
		if !refused[name] {
			t.Fatalf("%s took %q (signature %q): %d %q", name, body, sig, status, answer)
		}
		if ps, err := s.env.Payments.List(context.Background(), sale.PaymentFilter{Limit: 10}); err != nil || len(ps) != 0 {
			t.Fatalf("%s's refused notice %q recorded payments %+v, %v", name, body, ps, err)
		}
	})
}

// stripeNotices configures Stripe for its notices alone: no payment is started, so its API is
// never called.
type stripeNotices struct{ *stripeCase }

func (stripeNotices) configure(_ testing.TB, c *node.Payments, _ string) {
	c.Stripe = node.Stripe{SecretKey: "sk_test_123", WebhookSecret: stripeSecret, APIURL: "http://127.0.0.1:9", Currency: "usd"}
}

// TestCurrencies: an activity's currency goes to Stripe's session (the shop's,
// SECKILL_STRIPE_CURRENCY, when it names none); Alipay and WeChat Pay take cny alone, and a pay
// call at one of them for another currency is refused with no payment started.
func TestCurrencies(t *testing.T) {
	testtier.NeedsServer(t, "stripe-mock")
	st := &stripeCase{}
	s := newProviderSite(t, st, &alipayCase{}, &wechatCase{})
	for _, tc := range []struct{ currency, want string }{{"", "usd"}, {"eur", "eur"}} {
		o := s.orderIn("u-"+tc.want, tc.currency)
		p, _ := s.pay("u-"+tc.want, o)
		if got := st.currencyOf(p.ID); got != tc.want {
			t.Errorf("an activity in %q: Stripe's session in %q, want %q", tc.currency, got, tc.want)
		}
	}
	for _, provider := range []string{"alipay", "wechatpay"} {
		o := s.orderIn("v-"+provider, "usd")
		status, body := s.call("POST", "/api/orders/"+o.Token+"/pay", "v-"+provider, fmt.Sprintf(`{"provider":%q}`, provider))
		if e, _ := body["error"].(map[string]any); status != http.StatusBadRequest || e["code"] != "INVALID_ARGUMENT" {
			t.Errorf("%s for usd: %d %v; want 400 INVALID_ARGUMENT", provider, status, body)
		}
		if ps, err := s.env.Payments.List(context.Background(), sale.PaymentFilter{OrderToken: o.Token, Limit: 10}); err != nil || len(ps) != 0 {
			t.Errorf("%s for usd started payments %+v, %v", provider, ps, err)
		}
		s.pr = s.prs[1]
		if provider == "wechatpay" {
			s.pr = s.prs[2]
		}
		o = s.orderIn("w-"+provider, "cny")
		s.pay("w-"+provider, o)
		s.pr = s.prs[0]
	}
}

// currencyOf is the currency of the session Stripe was asked for payment id.
func (s *stripeCase) currencyOf(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.currencies[id]
}
