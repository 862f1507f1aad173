package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"seckill/internal/e2etest"
	"seckill/internal/paytest"
	"seckill/internal/sale"
	"seckill/internal/servers"
	"seckill/internal/testtier"
)

// TestKillNineBetweenARefundAndItsRecord: for each provider the node refunds through, a late
// payment's refund is asked of the provider, which makes it; the node is killed with SIGKILL
// before the provider's answer reaches it, and started again on the same database. The refunds'
// relay asks again under the same refund id (Alipay's out_request_no, WeChat Pay's
// out_refund_no, Stripe's Idempotency-Key), the provider makes no second refund, and the order
// ends REFUNDED: the money went back once, and the node knows it.
func TestKillNineBetweenARefundAndItsRecord(t *testing.T) {
	for _, provider := range []string{"alipay", "wechatpay", "stripe"} {
		t.Run(provider, func(t *testing.T) {
			if provider == "stripe" {
				testtier.NeedsServer(t, "stripe-mock")
			}
			killBetweenRefundAndRecord(t, provider)
		})
	}
}

// refundHold is a proxy in front of a provider's API that lets everything through, records the
// refund calls (their refund ids), and holds the answer to the first one, once the provider has
// made the refund, until the test releases it: the node dies waiting.
type refundHold struct {
	mu      sync.Mutex
	ids     []string // the refund id of each refund call, in order
	made    chan struct{}
	release chan struct{}
}

func newRefundHold(t *testing.T, target http.Handler, refundOf func(r *http.Request, body []byte) (string, bool)) (*refundHold, *httptest.Server) {
	h := &refundHold{made: make(chan struct{}), release: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		id, refund := refundOf(r, body)
		if !refund {
			target.ServeHTTP(w, r)
			return
		}
		h.mu.Lock()
		h.ids = append(h.ids, id)
		first := len(h.ids) == 1
		h.mu.Unlock()
		if !first {
			target.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		target.ServeHTTP(rec, r) // the provider makes the refund
		close(h.made)
		select { // and its answer never reaches the node
		case <-h.release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { closeOnce(h.release) })
	return h, srv
}

func (h *refundHold) refundIDs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.ids...)
}

func killBetweenRefundAndRecord(t *testing.T, provider string) {
	dir := t.TempDir()
	appKey, providerKey, err := paytest.WriteKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	env := testEnv(sqliteDSN(t), "SECKILL_PAYMENT_PROVIDERS", provider, "SECKILL_PUBLIC_URL", "https://shop.example",
		"SECKILL_SWEEP_EVERY", "100ms")
	var hold *refundHold
	var notice func(payID, token string, cents int64) (http.Header, string, []byte)
	var made func() map[string]int64 // the refunds the provider made, by refund id
	switch provider {
	case "alipay":
		gw := paytest.StartAlipay("2021000000000001", &paytest.Key(0).PublicKey, paytest.Key(1))
		t.Cleanup(gw.Close)
		var srv *httptest.Server
		hold, srv = newRefundHold(t, gw, func(r *http.Request, body []byte) (string, bool) {
			f, _ := url.ParseQuery(string(body))
			var biz map[string]string
			json.Unmarshal([]byte(f.Get("biz_content")), &biz)
			return biz["out_request_no"], r.Method == http.MethodPost && f.Get("method") == "alipay.trade.refund"
		})
		env["SECKILL_ALIPAY_APP_ID"], env["SECKILL_ALIPAY_PRIVATE_KEY"] = gw.AppID, appKey
		env["SECKILL_ALIPAY_PUBLIC_KEY"], env["SECKILL_ALIPAY_GATEWAY"] = providerKey, srv.URL+"/gateway.do"
		notice = func(payID, _ string, cents int64) (http.Header, string, []byte) {
			return nil, "application/x-www-form-urlencoded", []byte(gw.Notice(nil, payID, "TRADE_SUCCESS", cents, nil).Encode())
		}
		made = func() map[string]int64 { m, _ := gw.Refunds(); return m }
	case "wechatpay":
		const apiV3Key = "0123456789abcdef0123456789abcdef"
		api := paytest.StartWeChatPay("1900000109", "wxd678efh567hg6787", "MERCHANT-SERIAL", &paytest.Key(0).PublicKey,
			"PUB_KEY_ID_0001", paytest.Key(1), []byte(apiV3Key))
		t.Cleanup(api.Close)
		var srv *httptest.Server
		hold, srv = newRefundHold(t, api, func(r *http.Request, body []byte) (string, bool) {
			var in struct {
				OutRefundNo string `json:"out_refund_no"`
			}
			json.Unmarshal(body, &in)
			return in.OutRefundNo, r.URL.Path == "/v3/refund/domestic/refunds"
		})
		for k, v := range map[string]string{"SECKILL_WECHATPAY_MCH_ID": api.MchID, "SECKILL_WECHATPAY_APP_ID": api.AppID,
			"SECKILL_WECHATPAY_SERIAL": "MERCHANT-SERIAL", "SECKILL_WECHATPAY_PRIVATE_KEY": appKey,
			"SECKILL_WECHATPAY_PLATFORM_KEY": providerKey, "SECKILL_WECHATPAY_PLATFORM_SERIAL": "PUB_KEY_ID_0001",
			"SECKILL_WECHATPAY_APIV3_KEY": apiV3Key, "SECKILL_WECHATPAY_API_URL": srv.URL} {
			env[k] = v
		}
		notice = func(payID, _ string, cents int64) (http.Header, string, []byte) {
			h, body := api.Notice(nil, time.Now(), "EV-"+payID, "TRANSACTION.SUCCESS", api.Paid(payID, cents))
			return h, "application/json", body
		}
		made = func() map[string]int64 { m, _ := api.Refunds(); return m }
	case "stripe":
		mock, err := servers.StartStripeMock(dir)
		if err != nil {
			t.Fatalf("stripe-mock: %v", err)
		}
		t.Cleanup(mock.Stop)
		target, _ := url.Parse(mock.URL())
		var srv *httptest.Server
		hold, srv = newRefundHold(t, httputil.NewSingleHostReverseProxy(target), func(r *http.Request, _ []byte) (string, bool) {
			return r.Header.Get("Idempotency-Key"), r.Method == http.MethodPost && r.URL.Path == "/v1/refunds"
		})
		const secret = "whsec_the_endpoint_of_the_test"
		env["SECKILL_STRIPE_SECRET_KEY"], env["SECKILL_STRIPE_WEBHOOK_SECRET"], env["SECKILL_STRIPE_API_URL"] = "sk_test_123", secret, srv.URL
		notice = func(payID, token string, cents int64) (http.Header, string, []byte) {
			body, _ := json.Marshal(map[string]any{"id": "evt_" + payID, "object": "event", "type": "checkout.session.completed",
				"api_version": "2025-08-27.basil", "created": time.Now().Unix(), "data": map[string]any{"object": map[string]any{
					"id": "cs_" + payID, "object": "checkout.session", "client_reference_id": payID,
					"metadata": map[string]string{"payment_id": payID, "order_token": token}, "amount_total": cents,
					"payment_status": "paid", "payment_intent": "pi_" + payID}}})
			h := http.Header{}
			h.Set("Stripe-Signature", webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret,
				Timestamp: time.Now()}).Header)
			return h, "application/json", body
		}
		// stripe-mock keeps nothing: Stripe makes one refund per Idempotency-Key, which is
		// what the node must send the same.
		made = func() map[string]int64 {
			out := map[string]int64{}
			for _, id := range hold.refundIDs() {
				out[id] = 100
			}
			return out
		}
	}

	first := e2etest.StartChild(t, env)
	c := newClient(t, first.Base)
	id := c.CreateItem(5, 1, time.Second)
	token := c.Must("POST", "/api/activities/"+id+"/grab", c.Token("bob"), "", http.StatusAccepted)["order_token"].(string)
	c.Drained(id)
	p := c.Must("POST", "/api/orders/"+token+"/pay", c.Token("bob"), "", http.StatusAccepted)["payment"].(map[string]any)
	payID, payURL := p["payment_id"].(string), p["pay_url"].(string)
	if provider == "alipay" { // the buyer at the gateway's page: the trade the notice is of
		resp, err := http.Get(payURL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	waitStatus := func(c *e2etest.Client, want string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			o := c.Must("GET", "/api/orders/"+token, c.Token("bob"), "", http.StatusOK)
			if o["status"] == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("bob's order: %v; want %s", o, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitStatus(c, "CANCELLED") // the window (1 s) closed and the sweeper took the unit back
	h, ct, body := notice(payID, token, 100)
	status, answer, err := paytest.Post(first.Base+"/api/payments/"+provider, ct, h, body)
	if err != nil || status >= 300 || (provider == "alipay" && answer != "success") {
		t.Fatalf("the late payment's notice: %d %q, %v", status, answer, err)
	}
	select {
	case <-hold.made:
	case <-time.After(30 * time.Second):
		t.Fatal("the node never asked the provider for the refund")
	}
	first.Kill() // the provider has refunded; the node never heard
	closeOnce(hold.release)
	again := e2etest.StartChild(t, env)
	waitStatus(newClient(t, again.Base), "REFUNDED")

	want := sale.RefundID(payID)
	ids := hold.refundIDs()
	if len(ids) < 2 {
		t.Errorf("refund calls %v; want the first and the one after the restart", ids)
	}
	for _, id := range ids {
		if id != want {
			t.Errorf("a refund call named %q; want every one %q, the refund's idempotency key", id, want)
		}
	}
	if m := made(); len(m) != 1 || m[want] != 100 {
		t.Errorf("the provider made refunds %v; want one, %s of 100 cents", m, want)
	}
}

// TestCheckReadsTheProvidersKeys: seckill check refuses what the node would refuse at its start:
// a provider's key file missing or not a key, a setting it needs left out, a provider it does
// not know; and it accepts a provider configured whole.
func TestCheckReadsTheProvidersKeys(t *testing.T) {
	dir := t.TempDir()
	appKey, alipayKey, err := paytest.WriteKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	alipay := func(more ...string) map[string]string {
		env := map[string]string{"SECKILL_PAYMENT_PROVIDERS": "alipay", "SECKILL_PUBLIC_URL": "https://shop.example",
			"SECKILL_ALIPAY_APP_ID": "2021000000000001", "SECKILL_ALIPAY_PRIVATE_KEY": appKey, "SECKILL_ALIPAY_PUBLIC_KEY": alipayKey}
		for i := 0; i+1 < len(more); i += 2 {
			if more[i+1] == "" {
				delete(env, more[i])
			} else {
				env[more[i]] = more[i+1]
			}
		}
		return env
	}
	var out bytes.Buffer
	if err := checkCmd(nil, alipay(), &out, io.Discard); err != nil || !strings.Contains(out.String(), `"alipay"`) {
		t.Fatalf("check of a whole alipay: %v\n%s", err, out.String())
	}
	for name, tc := range map[string]struct {
		env  map[string]string
		want string
	}{
		"a missing key file":    {alipay("SECKILL_ALIPAY_PRIVATE_KEY", dir+"/nope.pem"), "SECKILL_ALIPAY_PRIVATE_KEY"},
		"a file that is no key": {alipay("SECKILL_ALIPAY_PUBLIC_KEY", appKey), "SECKILL_ALIPAY_PUBLIC_KEY"},
		"no app id":             {alipay("SECKILL_ALIPAY_APP_ID", ""), "SECKILL_ALIPAY_APP_ID"},
		"no public URL":         {alipay("SECKILL_PUBLIC_URL", ""), "SECKILL_PUBLIC_URL"},
		"an unknown provider":   {alipay("SECKILL_PAYMENT_PROVIDERS", "paypal"), "paypal"},
		"wechatpay's key short": {map[string]string{"SECKILL_PAYMENT_PROVIDERS": "wechatpay", "SECKILL_PUBLIC_URL": "https://shop.example",
			"SECKILL_WECHATPAY_MCH_ID": "1", "SECKILL_WECHATPAY_APP_ID": "wx", "SECKILL_WECHATPAY_SERIAL": "S",
			"SECKILL_WECHATPAY_PRIVATE_KEY": appKey, "SECKILL_WECHATPAY_PLATFORM_KEY": alipayKey, "SECKILL_WECHATPAY_PLATFORM_SERIAL": "P",
			"SECKILL_WECHATPAY_APIV3_KEY": "short"}, "SECKILL_WECHATPAY_APIV3_KEY"},
	} {
		if err := checkCmd(nil, tc.env, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error naming %s", name, err, tc.want)
		}
	}
}

// TestPaymentsOutlastAProviderOutage: WeChat Pay's API is unreachable (every connection to it
// dropped) while a buyer starts to pay and while a late payment's refund is due. The pay call
// answers 503 BUSY, and succeeds once the API is back, with the payment it had started; the
// refunds' relay fails its attempts, backs off, and makes the refund once the API answers again:
// the order ends REFUNDED, one refund made.
func TestPaymentsOutlastAProviderOutage(t *testing.T) {
	dir := t.TempDir()
	merchantKey, platformKey, err := paytest.WriteKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	const apiV3Key = "0123456789abcdef0123456789abcdef"
	api := paytest.StartWeChatPay("1900000109", "wxd678efh567hg6787", "MERCHANT-SERIAL", &paytest.Key(0).PublicKey,
		"PUB_KEY_ID_0001", paytest.Key(1), []byte(apiV3Key))
	t.Cleanup(api.Close)
	var down sync.Mutex // held: the API is unreachable
	var dropped int
	var mu sync.Mutex
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !down.TryLock() {
			mu.Lock()
			dropped++
			mu.Unlock()
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close() // the connection dies, as a provider that is away
			}
			return
		}
		down.Unlock()
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	env := testEnv(sqliteDSN(t), "SECKILL_PAYMENT_PROVIDERS", "wechatpay", "SECKILL_PUBLIC_URL", "https://shop.example",
		"SECKILL_SWEEP_EVERY", "100ms", "SECKILL_WECHATPAY_MCH_ID", api.MchID, "SECKILL_WECHATPAY_APP_ID", api.AppID,
		"SECKILL_WECHATPAY_SERIAL", "MERCHANT-SERIAL", "SECKILL_WECHATPAY_PRIVATE_KEY", merchantKey,
		"SECKILL_WECHATPAY_PLATFORM_KEY", platformKey, "SECKILL_WECHATPAY_PLATFORM_SERIAL", "PUB_KEY_ID_0001",
		"SECKILL_WECHATPAY_APIV3_KEY", apiV3Key, "SECKILL_WECHATPAY_API_URL", front.URL)
	node := e2etest.StartChild(t, env)
	c := newClient(t, node.Base)
	id := c.CreateItem(5, 1, time.Second)
	token := c.Must("POST", "/api/activities/"+id+"/grab", c.Token("bob"), "", http.StatusAccepted)["order_token"].(string)
	c.Drained(id)

	down.Lock() // the API goes away
	status, body, err := c.Call("POST", "/api/orders/"+token+"/pay", c.Token("bob"), "")
	if e, _ := body["error"].(map[string]any); err != nil || status != http.StatusServiceUnavailable || e["code"] != "BUSY" {
		t.Fatalf("pay while the provider is away: %d %v, %v; want 503 BUSY", status, body, err)
	}
	down.Unlock()
	p := c.Must("POST", "/api/orders/"+token+"/pay", c.Token("bob"), "", http.StatusAccepted)["payment"].(map[string]any)
	payID := p["payment_id"].(string)
	deadline := time.Now().Add(30 * time.Second)
	for c.Must("GET", "/api/orders/"+token, c.Token("bob"), "", http.StatusOK)["status"] != "CANCELLED" {
		if time.Now().After(deadline) {
			t.Fatal("the sweeper never cancelled bob's order")
		}
		time.Sleep(50 * time.Millisecond)
	}
	down.Lock() // away again, as the late payment's refund falls due
	h, notice := api.Notice(nil, time.Now(), "EV-"+payID, "TRANSACTION.SUCCESS", api.Paid(payID, 100))
	if status, answer, err := paytest.Post(node.Base+"/api/payments/wechatpay", "application/json", h, notice); err != nil || status != http.StatusNoContent {
		t.Fatalf("the late payment's notice: %d %q, %v", status, answer, err)
	}
	for {
		mu.Lock()
		n := dropped
		mu.Unlock()
		if n >= 3 { // the pay call's, and at least two of the relay's attempts
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the refund was tried %d times while the provider was away", n-1)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if o := c.Must("GET", "/api/orders/"+token, c.Token("bob"), "", http.StatusOK); o["status"] != "REFUND_PENDING" {
		t.Fatalf("bob's order while the refund cannot be made: %v", o)
	}
	down.Unlock() // back
	for c.Must("GET", "/api/orders/"+token, c.Token("bob"), "", http.StatusOK)["status"] != "REFUNDED" {
		if time.Now().After(deadline) {
			t.Fatal("the refund was never made once the provider came back")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if made, _ := api.Refunds(); len(made) != 1 || made[sale.RefundID(payID)] != 100 {
		t.Errorf("the provider made refunds %v; want one of 100 cents", made)
	}
}
