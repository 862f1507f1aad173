package wechatpay_test

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"seckill/internal/paytest"
	"seckill/internal/wechatpay"
)

func merchantKey() *rsa.PrivateKey { return paytest.Key(0) }
func platformKey() *rsa.PrivateKey { return paytest.Key(1) }
func otherKey() *rsa.PrivateKey    { return paytest.Key(2) }

const (
	platformSerial = "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"
	mchID          = "1900000001"
	appID          = "wxd678efh567hg6787"
)

var apiV3Key = []byte("0123456789abcdef0123456789abcdef")

// now is the tests' clock: the client's and the fake's.
var now = time.Date(2026, 12, 4, 16, 0, 0, 0, time.UTC)

func client(api string) *wechatpay.Client {
	return &wechatpay.Client{MchID: mchID, AppID: appID, Serial: "MERCHANT-SERIAL", Key: merchantKey(), APIv3Key: apiV3Key, API: api,
		NotifyURL: "https://shop.example.com/api/payments/wechatpay",
		Verifier:  wechatpay.Verifier{Keys: map[string]*rsa.PublicKey{platformSerial: &platformKey().PublicKey}, Now: func() time.Time { return now }}}
}

// signed returns headers that sign body as WeChat Pay would: with key, named serial, at ts.
func signed(t testing.TB, key *rsa.PrivateKey, serial string, ts time.Time, body []byte) http.Header {
	t.Helper()
	stamp, nonce := strconv.FormatInt(ts.Unix(), 10), "nonce-"+strconv.FormatInt(ts.UnixNano(), 36)
	sig, err := wechatpay.Sign(key, wechatpay.ResponseMessage(stamp, nonce, body))
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set(wechatpay.HeaderTimestamp, stamp)
	h.Set(wechatpay.HeaderNonce, nonce)
	h.Set(wechatpay.HeaderSignature, sig)
	h.Set(wechatpay.HeaderSerial, serial)
	return h
}

var authRE = regexp.MustCompile(`^WECHATPAY2-SHA256-RSA2048 mchid="([^"]+)",nonce_str="([^"]+)",signature="([^"]+)",timestamp="([^"]+)",serial_no="([^"]+)"$`)

// api is a fake WeChat Pay API: it checks every request's Authorization with the merchant's
// public key and answers signed with the platform key (or answerKey, when set). A refund is made
// once per out_refund_no.
type api struct {
	t         *testing.T
	mu        sync.Mutex
	refunds   map[string]bool
	answerKey *rsa.PrivateKey
	serial    string
	at        time.Time
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	m := authRE.FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil || m[1] != mchID || m[5] != "MERCHANT-SERIAL" {
		a.t.Errorf("a request without the merchant's Authorization: %q", r.Header.Get("Authorization"))
		http.Error(w, `{"code":"SIGN_ERROR","message":"no"}`, http.StatusUnauthorized)
		return
	}
	sig, _ := base64.StdEncoding.DecodeString(m[3])
	sum := sha256.Sum256([]byte(wechatpay.RequestMessage(r.Method, r.URL.RequestURI(), m[4], m[2], body)))
	if rsa.VerifyPKCS1v15(&merchantKey().PublicKey, crypto.SHA256, sum[:], sig) != nil {
		a.t.Errorf("a request whose signature does not verify: %s %s", r.Method, r.URL)
		http.Error(w, `{"code":"SIGN_ERROR","message":"no"}`, http.StatusUnauthorized)
		return
	}
	var in map[string]any
	json.Unmarshal(body, &in)
	var out any
	switch r.URL.Path {
	case "/v3/pay/transactions/native":
		out = map[string]string{"code_url": "weixin://wxpay/bizpayurl?pr=" + in["out_trade_no"].(string)}
	case "/v3/pay/transactions/h5":
		if in["scene_info"] == nil {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"code":"PARAM_ERROR","message":"scene_info is required"}`))
			return
		}
		out = map[string]string{"h5_url": "https://wx.tenpay.com/cgi-bin/mmpayweb-bin/checkmweb?prepay_id=" + in["out_trade_no"].(string)}
	case "/v3/refund/domestic/refunds":
		no := in["out_refund_no"].(string)
		status := "PROCESSING"
		if a.refunds[no] {
			status = "SUCCESS"
		}
		a.refunds[no] = true
		amount := in["amount"].(map[string]any)
		out = map[string]any{"refund_id": "5030" + no, "out_refund_no": no, "out_trade_no": in["out_trade_no"], "status": status,
			"amount": map[string]any{"refund": amount["refund"], "total": amount["total"]}}
	default:
		http.NotFound(w, r)
		return
	}
	data, _ := json.Marshal(out)
	key := platformKey()
	if a.answerKey != nil {
		key = a.answerKey
	}
	for k, v := range signed(a.t, key, a.serial, a.at, data) {
		w.Header()[k] = v
	}
	w.Write(data)
}

func TestOrdersAndRefunds(t *testing.T) {
	fake := &api{t: t, refunds: map[string]bool{}, serial: platformSerial, at: now}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	c := client(srv.URL)
	ctx := context.Background()
	o := wechatpay.Order{OutTradeNo: "pay_abc", Cents: 990, Description: "Phone X", Expire: now.Add(15 * time.Minute), ClientIP: "203.0.113.9"}
	if u, err := c.Native(ctx, o); err != nil || u != "weixin://wxpay/bizpayurl?pr=pay_abc" {
		t.Errorf("native: %q, %v", u, err)
	}
	if u, err := c.H5(ctx, o); err != nil || u == "" {
		t.Errorf("h5: %q, %v", u, err)
	}
	r, err := c.Refund(ctx, "pay_abc", "ref_1", 990, 990)
	if err != nil || r.Status != "PROCESSING" || r.Amount.Refund != 990 {
		t.Errorf("refund: %+v, %v", r, err)
	}
	if r, err := c.Refund(ctx, "pay_abc", "ref_1", 990, 990); err != nil || r.Status != "SUCCESS" {
		t.Errorf("the refund asked again: %+v, %v", r, err)
	}
	// Answers WeChat Pay did not sign, or signed too long ago, are not believed.
	fake.answerKey = otherKey()
	if _, err := c.Native(ctx, o); !errors.Is(err, wechatpay.ErrSignature) {
		t.Errorf("an answer signed by another key: %v", err)
	}
	fake.answerKey, fake.serial = nil, "UNKNOWN"
	if _, err := c.Native(ctx, o); !errors.Is(err, wechatpay.ErrSerial) {
		t.Errorf("an answer of an unknown serial: %v", err)
	}
	fake.serial, fake.at = platformSerial, now.Add(-6*time.Minute)
	if _, err := c.Native(ctx, o); !errors.Is(err, wechatpay.ErrStale) {
		t.Errorf("a stale answer: %v", err)
	}
}

func TestAPIError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"code":"ORDERPAID","message":"the order is paid"}`))
	}))
	defer srv.Close()
	var ae *wechatpay.APIError
	if _, err := client(srv.URL).Native(context.Background(), wechatpay.Order{OutTradeNo: "pay_abc", Cents: 1}); !errors.As(err, &ae) ||
		ae.Status != 400 || ae.Code != "ORDERPAID" {
		t.Errorf("a refusal: %v", err)
	}
}

func TestResource(t *testing.T) {
	plain := []byte(`{"out_trade_no":"pay_abc"}`)
	r, err := wechatpay.Seal(apiV3Key, "abcdefghijkl", "transaction", plain)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.Decrypt(apiV3Key); err != nil || string(got) != string(plain) {
		t.Errorf("round trip: %q, %v", got, err)
	}
	tag := r
	raw, _ := base64.StdEncoding.DecodeString(r.Ciphertext)
	raw[len(raw)-1] ^= 1
	tag.Ciphertext = base64.StdEncoding.EncodeToString(raw)
	aad := r
	aad.AssociatedData = "refund"
	algo := r
	algo.Algorithm = "AES_128_CBC"
	for name, tc := range map[string]struct {
		r   wechatpay.Resource
		key []byte
	}{
		"its tag altered": {tag, apiV3Key}, "other associated data": {aad, apiV3Key}, "another key": {r, []byte("fedcba9876543210fedcba9876543210")},
		"a short key": {r, apiV3Key[:16]}, "another algorithm": {algo, apiV3Key},
	} {
		if _, err := tc.r.Decrypt(tc.key); !errors.Is(err, wechatpay.ErrDecrypt) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// noticeBody is a notice of event with plain as its resource, sealed with key.
func noticeBody(t testing.TB, event, aad string, plain any, key []byte) []byte {
	t.Helper()
	p, _ := json.Marshal(plain)
	r, err := wechatpay.Seal(key, "fGqKLnVrWzCz", aad, p)
	if err != nil {
		t.Fatal(err)
	}
	r.OriginalType = aad
	b, _ := json.Marshal(map[string]any{"id": "EV-2018022511223320873", "create_time": "2026-12-05T00:00:00+08:00",
		"resource_type": "encrypt-resource", "event_type": event, "summary": "支付成功", "resource": r})
	return b
}

func transaction(mch, app string) map[string]any {
	return map[string]any{"mchid": mch, "appid": app, "out_trade_no": "pay_abc", "transaction_id": "4200000001", "trade_state": "SUCCESS",
		"amount": map[string]any{"total": 990, "currency": "CNY"}}
}

func TestParseNotice(t *testing.T) {
	c := client("")
	body := noticeBody(t, wechatpay.TransactionSuccess, "transaction", transaction(mchID, appID), apiV3Key)
	n, err := c.ParseNotice(signed(t, platformKey(), platformSerial, now, body), body)
	if err != nil || n.Transaction == nil || n.Transaction.TradeState != "SUCCESS" || n.Transaction.Amount.Total != 990 ||
		n.Transaction.OutTradeNo != "pay_abc" || n.ID != "EV-2018022511223320873" {
		t.Fatalf("a valid notice: %+v, %v", n, err)
	}
	refund := noticeBody(t, wechatpay.RefundSuccess, "refund", map[string]any{"mchid": mchID, "out_trade_no": "pay_abc",
		"out_refund_no": "ref_1", "refund_id": "50301", "refund_status": "SUCCESS", "amount": map[string]any{"total": 990, "refund": 990}}, apiV3Key)
	if n, err := c.ParseNotice(signed(t, platformKey(), platformSerial, now, refund), refund); err != nil || n.Refund == nil ||
		n.Refund.OutRefundNo != "ref_1" || n.Refund.Amount.Refund != 990 {
		t.Errorf("a refund notice: %+v, %v", n, err)
	}

	altered := append([]byte{}, body...)
	altered[len(altered)-2] = ' '
	probe := signed(t, platformKey(), platformSerial, now, body)
	probe.Set(wechatpay.HeaderSignature, "WECHATPAY/SIGNTEST/"+probe.Get(wechatpay.HeaderSignature))
	otherMch := noticeBody(t, wechatpay.TransactionSuccess, "transaction", transaction("1900009999", appID), apiV3Key)
	otherApp := noticeBody(t, wechatpay.TransactionSuccess, "transaction", transaction(mchID, "wx0000"), apiV3Key)
	wrongKey := noticeBody(t, wechatpay.TransactionSuccess, "transaction", transaction(mchID, appID), []byte("fedcba9876543210fedcba9876543210"))
	for name, tc := range map[string]struct {
		h    http.Header
		body []byte
		want error // nil: refused for another reason
	}{
		"one byte of the body changed": {signed(t, platformKey(), platformSerial, now, body), altered, wechatpay.ErrSignature},
		"signed by another key":        {signed(t, otherKey(), platformSerial, now, body), body, wechatpay.ErrSignature},
		"an unknown serial":            {signed(t, platformKey(), "UNKNOWN", now, body), body, wechatpay.ErrSerial},
		"six minutes old":              {signed(t, platformKey(), platformSerial, now.Add(-6*time.Minute), body), body, wechatpay.ErrStale},
		"six minutes ahead":            {signed(t, platformKey(), platformSerial, now.Add(6*time.Minute), body), body, wechatpay.ErrStale},
		"a probe notice":               {probe, body, wechatpay.ErrSignature},
		"sealed with another key":      {signed(t, platformKey(), platformSerial, now, wrongKey), wrongKey, wechatpay.ErrDecrypt},
		"for another merchant":         {signed(t, platformKey(), platformSerial, now, otherMch), otherMch, nil},
		"for another app":              {signed(t, platformKey(), platformSerial, now, otherApp), otherApp, nil},
	} {
		_, err := c.ParseNotice(tc.h, tc.body)
		if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
}

// FuzzParseNotice: no body, however broken, panics the parser, and none is taken without the
// platform's signature.
func FuzzParseNotice(f *testing.F) {
	f.Add([]byte(`{"id":"EV-1","event_type":"TRANSACTION.SUCCESS","resource":{"algorithm":"AEAD_AES_256_GCM","ciphertext":"AAAA","nonce":"abc"}}`))
	f.Add([]byte(`not json`))
	c := client("")
	h := http.Header{}
	h.Set(wechatpay.HeaderSerial, platformSerial)
	h.Set(wechatpay.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	h.Set(wechatpay.HeaderNonce, "n")
	h.Set(wechatpay.HeaderSignature, base64.StdEncoding.EncodeToString(make([]byte, 256)))
	f.Fuzz(func(t *testing.T, body []byte) {
		if n, err := c.ParseNotice(h, body); err == nil {
			t.Fatalf("an unsigned notice was taken: %+v", n)
		}
	})
}
