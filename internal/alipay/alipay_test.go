package alipay_test

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill/internal/alipay"
	"seckill/internal/paytest"
)

func appKey() *rsa.PrivateKey    { return paytest.Key(0) }
func alipayKey() *rsa.PrivateKey { return paytest.Key(1) }
func otherKey() *rsa.PrivateKey  { return paytest.Key(2) }

func client(gateway string) *alipay.Client {
	return &alipay.Client{AppID: "2021000000000001", Key: appKey(), AlipayKey: &alipayKey().PublicKey, Gateway: gateway,
		NotifyURL: "https://shop.example.com/api/payments/alipay",
		Now:       func() time.Time { return time.Date(2026, 12, 4, 16, 0, 0, 0, time.UTC) }}
}

func TestContentSortsSkipsEmptyAndSign(t *testing.T) {
	p := url.Values{"b": {"2"}, "a": {"1&x"}, "sign": {"zzz"}, "empty": {""}, "sign_type": {"RSA2"}, "c": {"中文 3"}}
	if got, want := alipay.Content(p), "a=1&x&b=2&c=中文 3&sign_type=RSA2"; got != want {
		t.Errorf("request content %q, want %q", got, want)
	}
	if got, want := alipay.Content(p, "sign_type"), "a=1&x&b=2&c=中文 3"; got != want {
		t.Errorf("notice content %q, want %q", got, want)
	}
}

func TestSignatures(t *testing.T) {
	sig, err := alipay.Sign(appKey(), "a=1&b=2")
	if err != nil {
		t.Fatal(err)
	}
	if err := alipay.Verify(&appKey().PublicKey, "a=1&b=2", sig); err != nil {
		t.Errorf("own signature: %v", err)
	}
	for name, tc := range map[string]struct {
		key          *rsa.PublicKey
		content, sig string
	}{
		"another content": {&appKey().PublicKey, "a=1&b=3", sig},
		"another key":     {&otherKey().PublicKey, "a=1&b=2", sig},
		"not base64":      {&appKey().PublicKey, "a=1&b=2", "%%%"},
		"empty":           {&appKey().PublicKey, "a=1&b=2", ""},
	} {
		if err := alipay.Verify(tc.key, tc.content, tc.sig); !errors.Is(err, alipay.ErrSignature) {
			t.Errorf("%s: %v, want ErrSignature", name, err)
		}
	}
}

func TestCents(t *testing.T) {
	for in, want := range map[string]int64{"9.90": 990, "0.01": 1, "120.00": 12000, "100000000.00": 100_000_000_00} {
		if got, err := alipay.Cents(in); err != nil || got != want {
			t.Errorf("Cents(%q) = %d, %v; want %d", in, got, err, want)
		}
		if got := alipay.Yuan(want); got != in {
			t.Errorf("Yuan(%d) = %q, want %q", want, got, in)
		}
	}
	for _, in := range []string{"", "9", "9.9", "9.900", ".90", "09.90", "-9.90", "+9.90", "9,90", " 9.90", "9.90 ",
		"1e3.00", "0x1.00", "100000000.01", "99999999999999999999.00", "9.-1", "９.90"} {
		if got, err := alipay.Cents(in); err == nil {
			t.Errorf("Cents(%q) = %d; want refused", in, got)
		}
	}
}

func TestPayURLIsSignedByTheApp(t *testing.T) {
	for _, desktop := range []bool{false, true} {
		c := client("https://gateway.example.com/gateway.do")
		u, err := c.PayURL(alipay.Trade{OutTradeNo: "pay_abc", Cents: 990, Subject: "Phone X", ReturnURL: "https://shop.example.com/activity/a1",
			Expire: time.Date(2026, 12, 4, 16, 15, 0, 0, time.UTC), Desktop: desktop})
		if err != nil {
			t.Fatal(err)
		}
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		q := pu.Query()
		if pu.Host != "gateway.example.com" || q.Get("app_id") != c.AppID || q.Get("sign_type") != "RSA2" || q.Get("charset") != "utf-8" ||
			q.Get("timestamp") != "2026-12-05 00:00:00" || q.Get("notify_url") != c.NotifyURL {
			t.Errorf("pay URL %s", u)
		}
		if err := alipay.Verify(&appKey().PublicKey, alipay.Content(q), q.Get("sign")); err != nil {
			t.Errorf("the pay URL's signature: %v", err)
		}
		var biz map[string]string
		if err := json.Unmarshal([]byte(q.Get("biz_content")), &biz); err != nil {
			t.Fatal(err)
		}
		method, product := "alipay.trade.wap.pay", "QUICK_WAP_WAY"
		if desktop {
			method, product = "alipay.trade.page.pay", "FAST_INSTANT_TRADE_PAY"
		}
		if q.Get("method") != method || biz["product_code"] != product || biz["out_trade_no"] != "pay_abc" || biz["total_amount"] != "9.90" ||
			biz["time_expire"] != "2026-12-05 00:15:00" {
			t.Errorf("method %s, biz %v", q.Get("method"), biz)
		}
	}
	if _, err := client("").PayURL(alipay.Trade{OutTradeNo: "pay_abc", Cents: 0}); err == nil {
		t.Error("a trade of 0 cents was started")
	}
}

// notice is a notice of trade status for pay_abc, signed by key.
func notice(t *testing.T, key *rsa.PrivateKey, status, amount string) url.Values {
	t.Helper()
	f := url.Values{"notify_time": {"2026-12-05 00:01:00"}, "notify_type": {"trade_status_sync"}, "notify_id": {"n1"},
		"app_id": {"2021000000000001"}, "charset": {"utf-8"}, "version": {"1.0"}, "sign_type": {"RSA2"},
		"trade_no": {"2026120522001"}, "out_trade_no": {"pay_abc"}, "trade_status": {status}, "total_amount": {amount},
		"subject": {"Phone X"}}
	sig, err := alipay.Sign(key, alipay.Content(f, "sign_type"))
	if err != nil {
		t.Fatal(err)
	}
	f.Set("sign", sig)
	return f
}

func TestParseNotice(t *testing.T) {
	c := client("")
	n, err := c.ParseNotice(notice(t, alipayKey(), alipay.TradeSuccess, "9.90"))
	if err != nil || !n.Paid() || n.Cents != 990 || n.OutTradeNo != "pay_abc" || n.TradeNo != "2026120522001" || n.NotifyID != "n1" {
		t.Fatalf("a valid notice: %+v, %v", n, err)
	}
	if n, err := c.ParseNotice(notice(t, alipayKey(), alipay.TradeClosed, "9.90")); err != nil || n.Paid() {
		t.Errorf("a closed trade: %+v, %v", n, err)
	}
	altered := notice(t, alipayKey(), alipay.TradeSuccess, "9.90")
	altered.Set("total_amount", "0.01")
	added := notice(t, alipayKey(), alipay.TradeSuccess, "9.90")
	added.Set("refund_fee", "9.90")
	unsigned := notice(t, alipayKey(), alipay.TradeSuccess, "9.90")
	unsigned.Del("sign")
	otherApp := url.Values{}
	for k, v := range notice(t, alipayKey(), alipay.TradeSuccess, "9.90") {
		otherApp[k] = v
	}
	otherApp.Set("app_id", "2021999999999999")
	sig, _ := alipay.Sign(alipayKey(), alipay.Content(otherApp, "sign_type"))
	otherApp.Set("sign", sig)
	rsa1 := notice(t, alipayKey(), alipay.TradeSuccess, "9.90")
	rsa1.Set("sign_type", "RSA") // not signed over: the notice verifies, then is refused for it
	for name, tc := range map[string]struct {
		form url.Values
		sig  bool // refused for its signature
	}{
		"signed by another key":     {notice(t, otherKey(), alipay.TradeSuccess, "9.90"), true},
		"its amount altered":        {altered, true},
		"a parameter added":         {added, true},
		"no signature":              {unsigned, true},
		"for another app":           {otherApp, false},
		"sign_type RSA":             {rsa1, false},
		"an amount with 3 decimals": {notice(t, alipayKey(), alipay.TradeSuccess, "9.900"), false},
	} {
		_, err := c.ParseNotice(tc.form)
		if err == nil || errors.Is(err, alipay.ErrSignature) != tc.sig {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// gateway is a fake Alipay gateway for alipay.trade.refund: it checks every call's signature with
// the app's public key and answers signed with Alipay's key; a refund is made once per
// out_request_no.
type gateway struct {
	t       *testing.T
	mu      sync.Mutex
	refunds map[string]int64 // out_request_no -> cents
	total   int64
	sign    *rsa.PrivateKey // what the answers are signed with
	calls   int
}

func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls++
	body, _ := io.ReadAll(r.Body)
	p, err := url.ParseQuery(string(body))
	if err != nil {
		g.t.Errorf("a call that is no form: %v", err)
		return
	}
	answer := func(node string, fields map[string]string) {
		raw, _ := json.Marshal(fields)
		sig, _ := alipay.Sign(g.sign, string(raw))
		fmt.Fprintf(w, `{"%s":%s,"sign":%q}`, node, raw, sig)
	}
	if err := alipay.Verify(&appKey().PublicKey, alipay.Content(p), p.Get("sign")); err != nil || p.Get("method") != "alipay.trade.refund" {
		g.t.Errorf("a call not signed by the app (%v) or not a refund: %v", err, p)
		answer("error_response", map[string]string{"code": "40002", "msg": "Invalid Arguments", "sub_code": "isv.invalid-signature"})
		return
	}
	var biz map[string]string
	json.Unmarshal([]byte(p.Get("biz_content")), &biz)
	cents, err := alipay.Cents(biz["refund_amount"])
	if err != nil || biz["out_trade_no"] != "pay_abc" {
		answer("alipay_trade_refund_response", map[string]string{"code": "40004", "msg": "Business Failed", "sub_code": "ACQ.TRADE_NOT_EXIST"})
		return
	}
	change := "N"
	if _, done := g.refunds[biz["out_request_no"]]; !done {
		g.refunds[biz["out_request_no"]] = cents
		g.total += cents
		change = "Y"
	}
	answer("alipay_trade_refund_response", map[string]string{"code": "10000", "msg": "Success", "out_trade_no": "pay_abc",
		"fund_change": change, "refund_fee": alipay.Yuan(g.total)})
}

func TestRefund(t *testing.T) {
	g := &gateway{t: t, refunds: map[string]int64{}, sign: alipayKey()}
	srv := httptest.NewServer(g)
	defer srv.Close()
	c := client(srv.URL)
	ctx := context.Background()
	r, err := c.Refund(ctx, "pay_abc", "ref_1", 990)
	if err != nil || !r.Changed || r.RefundedCents != 990 {
		t.Fatalf("refund: %+v, %v", r, err)
	}
	// The answer was lost: asked again with the same out_request_no, it refunds nothing more.
	if r, err := c.Refund(ctx, "pay_abc", "ref_1", 990); err != nil || r.Changed || r.RefundedCents != 990 {
		t.Errorf("the retry: %+v, %v", r, err)
	}
	var ae *alipay.APIError
	if _, err := c.Refund(ctx, "pay_nope", "ref_2", 990); !errors.As(err, &ae) || ae.SubCode != "ACQ.TRADE_NOT_EXIST" {
		t.Errorf("a refund of no such trade: %v", err)
	}
	g.sign = otherKey() // an answer not signed by Alipay is not believed
	if _, err := c.Refund(ctx, "pay_abc", "ref_3", 1); !errors.Is(err, alipay.ErrSignature) {
		t.Errorf("a forged answer: %v", err)
	}
}

func TestKeys(t *testing.T) {
	k := appKey()
	for name, b := range map[string]*pem.Block{
		"PKCS #1": {Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)},
		"PKCS #8": {Type: "PRIVATE KEY", Bytes: must(x509.MarshalPKCS8PrivateKey(k))},
	} {
		got, err := alipay.ParsePrivateKey(pem.EncodeToMemory(b))
		if err != nil || !got.Equal(k) {
			t.Errorf("%s private key: %v", name, err)
		}
	}
	for name, b := range map[string]*pem.Block{
		"PKCS #1": {Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&k.PublicKey)},
		"PKIX":    {Type: "PUBLIC KEY", Bytes: must(x509.MarshalPKIXPublicKey(&k.PublicKey))},
	} {
		got, err := alipay.ParsePublicKey(pem.EncodeToMemory(b))
		if err != nil || !got.Equal(&k.PublicKey) {
			t.Errorf("%s public key: %v", name, err)
		}
	}
	if _, err := alipay.ParsePrivateKey([]byte("not a key")); err == nil || !strings.Contains(err.Error(), "PEM") {
		t.Errorf("not PEM: %v", err)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// FuzzParseNotice: no form, however broken, panics the parser or is taken without Alipay's
// signature.
func FuzzParseNotice(f *testing.F) {
	f.Add("app_id=2021000000000001&out_trade_no=pay_abc&trade_status=TRADE_SUCCESS&total_amount=9.90&sign=AAAA&sign_type=RSA2")
	f.Add("sign=%%%")
	f.Add("")
	c := client("")
	f.Fuzz(func(t *testing.T, body string) {
		form, err := url.ParseQuery(body)
		if err != nil {
			return
		}
		if n, err := c.ParseNotice(form); err == nil {
			t.Fatalf("an unsigned notice was taken: %+v", n)
		}
	})
}

// FuzzCents: an amount read is written back the same.
func FuzzCents(f *testing.F) {
	for _, s := range []string{"9.90", "0.01", "1e3", "09.90", "100000000.00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := alipay.Cents(s)
		if err != nil {
			return
		}
		if c <= 0 && s != "0.00" || alipay.Yuan(c) != s {
			t.Fatalf("Cents(%q) = %d, written back %q", s, c, alipay.Yuan(c))
		}
	})
}
