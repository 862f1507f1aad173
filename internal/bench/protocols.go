package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"seckill/internal/alipay"
	"seckill/internal/httpapi/wire"
	"seckill/internal/paytest"
	"seckill/internal/sale"
	"seckill/internal/signature"
	"seckill/internal/stripepay"
	"seckill/internal/wechatpay"
)

// ProviderKinds are the providers bench can pay at (--provider).
var ProviderKinds = []string{signature.ProviderName, stripepay.Name, alipay.Name, wechatpay.Name}

// benchPublicURL is the public URL the servers bench starts are told: the notify URLs the
// providers record are built on it, but bench sends each notice to the node it drives, as a
// load balancer in front of the nodes would.
const benchPublicURL = "http://seckill.bench.invalid"

// protocol is one provider's side of a payment as bench plays it: the servers' settings, the
// buyer at its page, its notices (real, or forged: signed with a key that is not the
// provider's) and what its answers mean, and the refunds the server asked it for.
type protocol interface {
	env() []string
	route() string // the server's route of its notices: /api/payments/{route}
	take(ctx context.Context, pay *wire.PaymentResponse) error
	notice(pm *payment, forged bool) notice
	taken(status int, body []byte) bool
	// refunds are the refunds made (refund id -> cents); refunding says the server makes them
	// by itself (false: the signed provider's refunds are an operator's).
	refunds() (made map[string]int64, refunding bool)
	close()
}

// notice is what a provider posts.
type notice struct {
	header      http.Header
	contentType string
	body        []byte
}

func openProtocol(p *Provider) (protocol, error) {
	dir := p.spec.Dir
	if dir == "" && p.spec.Kind != signature.ProviderName {
		var err error
		if dir, err = os.MkdirTemp("", "seckill-bench-provider-"); err != nil {
			return nil, err
		}
	}
	switch p.spec.Kind {
	case stripepay.Name:
		if p.spec.StripeMock == nil {
			return nil, errors.New("--provider stripe needs stripe-mock, which this build cannot start")
		}
		return openStripe(dir, p.spec.PaymentSecret, p.spec.StripeMock)
	case alipay.Name:
		appKey, alipayKey, err := paytest.WriteKeys(dir)
		if err != nil {
			return nil, err
		}
		gw := paytest.StartAlipay("2021000000000001", &paytest.Key(0).PublicKey, paytest.Key(1))
		return &alipayProtocol{gw: gw, appKey: appKey, alipayKey: alipayKey}, nil
	case wechatpay.Name:
		merchantKey, platformKey, err := paytest.WriteKeys(dir)
		if err != nil {
			return nil, err
		}
		apiV3Key := p.spec.PaymentSecret[:min(32, len(p.spec.PaymentSecret))]
		for len(apiV3Key) < 32 {
			apiV3Key += "0"
		}
		api := paytest.StartWeChatPay("1900000109", "wxd678efh567hg6787", "MERCHANT-SERIAL", &paytest.Key(0).PublicKey,
			"PUB_KEY_ID_BENCH", paytest.Key(1), []byte(apiV3Key))
		return &wechatProtocol{api: api, merchantKey: merchantKey, platformKey: platformKey, apiV3Key: apiV3Key}, nil
	}
	return &signedProtocol{p: p}, nil
}

// signedProtocol is the generic signed callback: its checkout page is the Provider's own.
type signedProtocol struct{ p *Provider }

func (s *signedProtocol) env() []string {
	return []string{"SECKILL_PAYMENT_SECRET=" + s.p.spec.PaymentSecret, "SECKILL_PAYMENT_URL=" + s.p.CheckoutURL()}
}

func (*signedProtocol) route() string { return "callback" }

func (*signedProtocol) take(context.Context, *wire.PaymentResponse) error { return nil } // the checkout page takes it

func (s *signedProtocol) notice(pm *payment, forged bool) notice {
	body, _ := json.Marshal(wire.CallbackRequest{OrderToken: pm.token, PaymentID: pm.id, AmountCents: &pm.amount,
		Status: sale.OutcomeSucceeded})
	secret := []byte(s.p.spec.PaymentSecret)
	if forged {
		secret = []byte("not the provider's secret at all")
	}
	h := http.Header{}
	h.Set(signature.Header, signature.Sign(secret, time.Now(), body))
	return notice{header: h, contentType: "application/json", body: body}
}

func (*signedProtocol) taken(status int, _ []byte) bool { return status == http.StatusOK }

func (*signedProtocol) refunds() (map[string]int64, bool) { return nil, false }

func (*signedProtocol) close() {}

// alipayProtocol is Alipay: its gateway faked in this process (paytest.Alipay), which checks the
// server's signatures on the buyers' visits and its refunds.
type alipayProtocol struct {
	gw                *paytest.Alipay
	appKey, alipayKey string // the PEM files the servers read
}

func (a *alipayProtocol) env() []string {
	return []string{"SECKILL_PAYMENT_PROVIDERS=alipay", "SECKILL_PUBLIC_URL=" + benchPublicURL, "SECKILL_ALIPAY_APP_ID=" + a.gw.AppID,
		"SECKILL_ALIPAY_PRIVATE_KEY=" + a.appKey, "SECKILL_ALIPAY_PUBLIC_KEY=" + a.alipayKey, "SECKILL_ALIPAY_GATEWAY=" + a.gw.URL()}
}

func (*alipayProtocol) route() string { return alipay.Name }

// take is the buyer's browser at the gateway's page: it takes nothing unless the server signed
// the trade.
func (a *alipayProtocol) take(ctx context.Context, pay *wire.PaymentResponse) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, pay.PayURL, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	t, ok := a.gw.Trade(pay.PaymentID)
	if resp.StatusCode != http.StatusOK || !ok || t.Cents != pay.AmountCents {
		return fmt.Errorf("alipay's page took no trade %s of %d cents (%s; %v)", pay.PaymentID, pay.AmountCents, resp.Status, a.gw.Refused())
	}
	return nil
}

func (a *alipayProtocol) notice(pm *payment, forged bool) notice {
	key := paytest.Key(1)
	if forged {
		key = paytest.Key(2)
	}
	f := a.gw.Notice(key, pm.id, alipay.TradeSuccess, pm.amount, nil)
	return notice{contentType: "application/x-www-form-urlencoded; charset=utf-8", body: []byte(f.Encode())}
}

func (*alipayProtocol) taken(status int, body []byte) bool {
	return status == http.StatusOK && string(body) == "success"
}

func (a *alipayProtocol) refunds() (map[string]int64, bool) {
	made, _ := a.gw.Refunds()
	return made, true
}

func (a *alipayProtocol) close() { a.gw.Close() }

// wechatProtocol is WeChat Pay (API v3): its API faked in this process (paytest.WeChatPay), which
// checks the server's signature on every order and refund.
type wechatProtocol struct {
	api                                *paytest.WeChatPay
	merchantKey, platformKey, apiV3Key string
}

func (w *wechatProtocol) env() []string {
	return []string{"SECKILL_PAYMENT_PROVIDERS=wechatpay", "SECKILL_PUBLIC_URL=" + benchPublicURL,
		"SECKILL_WECHATPAY_MCH_ID=" + w.api.MchID, "SECKILL_WECHATPAY_APP_ID=" + w.api.AppID,
		"SECKILL_WECHATPAY_SERIAL=" + w.api.MerchantSerial, "SECKILL_WECHATPAY_PRIVATE_KEY=" + w.merchantKey,
		"SECKILL_WECHATPAY_PLATFORM_KEY=" + w.platformKey, "SECKILL_WECHATPAY_PLATFORM_SERIAL=" + w.api.Serial,
		"SECKILL_WECHATPAY_APIV3_KEY=" + w.apiV3Key, "SECKILL_WECHATPAY_API_URL=" + w.api.URL()}
}

func (*wechatProtocol) route() string { return wechatpay.Name }

// take is the buyer scanning the code: the order the server placed at the API, of the amount.
func (w *wechatProtocol) take(_ context.Context, pay *wire.PaymentResponse) error {
	o, ok := w.api.Order(pay.PaymentID)
	if !ok || o.Cents != pay.AmountCents || !strings.HasPrefix(pay.PayURL, "weixin://") {
		return fmt.Errorf("wechat pay has no order %s of %d cents to scan (pay_url %q; %v)", pay.PaymentID, pay.AmountCents, pay.PayURL,
			w.api.Refused())
	}
	return nil
}

func (w *wechatProtocol) notice(pm *payment, forged bool) notice {
	var key = paytest.Key(1)
	if forged {
		key = paytest.Key(2)
	}
	h, body := w.api.Notice(key, time.Now(), "EV-"+pm.id, wechatpay.TransactionSuccess, w.api.Paid(pm.id, pm.amount))
	return notice{header: h, contentType: "application/json", body: body}
}

func (*wechatProtocol) taken(status int, _ []byte) bool { return status == http.StatusNoContent }

func (w *wechatProtocol) refunds() (map[string]int64, bool) {
	made, _ := w.api.Refunds()
	return made, true
}

func (w *wechatProtocol) close() { w.api.Close() }

// stripeProtocol is Stripe: its API on stripe-mock, behind a proxy that records the refunds the
// server asks for (stripe-mock keeps nothing); its events signed with the endpoint's secret by
// stripe-go's own helper.
type stripeProtocol struct {
	stopMock func()
	proxy    *httptest.Server
	secret   string // the webhook endpoint's

	mu   sync.Mutex
	made map[string]int64 // Idempotency-Key's refund id -> cents, once per key, as Stripe keeps them
}

func openStripe(dir, secret string, start func(dir string) (string, func(), error)) (*stripeProtocol, error) {
	api, stop, err := start(dir)
	if err != nil {
		return nil, fmt.Errorf("--provider stripe: %w", err)
	}
	target, _ := url.Parse(api)
	s := &stripeProtocol{stopMock: stop, secret: "whsec_" + secret, made: map[string]int64{}}
	rp := httputil.NewSingleHostReverseProxy(target)
	s.proxy = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/refunds" {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			f, _ := url.ParseQuery(string(body))
			var cents int64
			fmt.Sscan(f.Get("amount"), &cents)
			s.mu.Lock()
			if id := f.Get("metadata[refund_id]"); id != "" && r.Header.Get("Idempotency-Key") != "" {
				if _, seen := s.made[id]; !seen {
					s.made[id] = cents
				}
			}
			s.mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	return s, nil
}

func (s *stripeProtocol) env() []string {
	return []string{"SECKILL_PAYMENT_PROVIDERS=stripe", "SECKILL_PUBLIC_URL=" + benchPublicURL, "SECKILL_STRIPE_SECRET_KEY=sk_test_bench",
		"SECKILL_STRIPE_WEBHOOK_SECRET=" + s.secret, "SECKILL_STRIPE_API_URL=" + s.proxy.URL}
}

func (*stripeProtocol) route() string { return stripepay.Name }

// take is the buyer at the Checkout page stripe-mock's session names: nothing to check there.
func (*stripeProtocol) take(_ context.Context, pay *wire.PaymentResponse) error {
	if !strings.HasPrefix(pay.PayURL, "https://") {
		return fmt.Errorf("pay_url %q is no Checkout page", pay.PayURL)
	}
	return nil
}

func (s *stripeProtocol) notice(pm *payment, forged bool) notice {
	body, _ := json.Marshal(map[string]any{"id": "evt_" + pm.id, "object": "event", "type": "checkout.session.completed",
		"api_version": "2025-08-27.basil", "created": time.Now().Unix(), "data": map[string]any{"object": map[string]any{
			"id": "cs_test_" + pm.id, "object": "checkout.session", "client_reference_id": pm.id,
			"metadata": map[string]string{"payment_id": pm.id, "order_token": pm.token}, "amount_total": pm.amount,
			"payment_status": "paid", "payment_intent": "pi_" + pm.id}}})
	secret := s.secret
	if forged {
		secret = "whsec_not_the_endpoint_s"
	}
	sig := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: time.Now()}).Header
	h := http.Header{}
	h.Set("Stripe-Signature", sig)
	return notice{header: h, contentType: "application/json", body: body}
}

func (*stripeProtocol) taken(status int, _ []byte) bool { return status == http.StatusOK }

func (s *stripeProtocol) refunds() (map[string]int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.made), true
}

func (s *stripeProtocol) close() {
	s.proxy.Close()
	s.stopMock()
}
