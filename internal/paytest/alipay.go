package paytest

import (
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"

	"seckill/internal/alipay"
)

// Alipay is a fake Alipay gateway for a node's tests: the buyer's visit to a pay URL (a GET,
// whose signature it checks with the app's public key before it records the trade) and
// alipay.trade.refund (a POST, checked the same way, answered signed with Alipay's key, made
// once per out_request_no). It writes Alipay's notices of what happened, signed with its key.
type Alipay struct {
	AppID  string
	AppKey *rsa.PublicKey  // checks what the node sends
	Key    *rsa.PrivateKey // Alipay's: signs its answers and notices

	srv     *httptest.Server
	mu      sync.Mutex
	trades  map[string]*AlipayTrade
	refunds map[string]int64 // out_request_no -> cents
	calls   int
	refused []string
}

// AlipayTrade is a trade a buyer came to pay: what the node's signed pay URL asked for.
type AlipayTrade struct {
	OutTradeNo, TradeNo, Passback, NotifyURL, Method, Subject string
	Cents, RefundedCents                                      int64
}

// StartAlipay serves a fake gateway until Close.
func StartAlipay(appID string, appKey *rsa.PublicKey, key *rsa.PrivateKey) *Alipay {
	a := &Alipay{AppID: appID, AppKey: appKey, Key: key, trades: map[string]*AlipayTrade{}, refunds: map[string]int64{}}
	a.srv = httptest.NewServer(a)
	return a
}

// URL is the gateway's (SECKILL_ALIPAY_GATEWAY).
func (a *Alipay) URL() string { return a.srv.URL + "/gateway.do" }

// Close stops the gateway.
func (a *Alipay) Close() { a.srv.Close() }

// Refused are the calls the gateway refused: a signature that does not verify, another app.
func (a *Alipay) Refused() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.refused...)
}

// Trade returns the trade of outTradeNo, as the buyer's visit recorded it.
func (a *Alipay) Trade(outTradeNo string) (AlipayTrade, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.trades[outTradeNo]
	if !ok {
		return AlipayTrade{}, false
	}
	return *t, true
}

// Refunds returns the refunds made (out_request_no -> cents) and how many refund calls came.
func (a *Alipay) Refunds() (map[string]int64, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.refunds), a.calls
}

func (a *Alipay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := r.URL.Query()
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		p, _ = url.ParseQuery(string(body))
	}
	if err := alipay.Verify(a.AppKey, alipay.Content(p), p.Get("sign")); err != nil || p.Get("app_id") != a.AppID {
		a.refused = append(a.refused, fmt.Sprintf("%s %s: %v, app %q", r.Method, p.Get("method"), err, p.Get("app_id")))
		a.answer(w, "error_response", map[string]string{"code": "40002", "msg": "Invalid Arguments", "sub_code": "isv.invalid-signature"})
		return
	}
	var biz map[string]string
	json.Unmarshal([]byte(p.Get("biz_content")), &biz)
	switch p.Get("method") {
	case "alipay.trade.wap.pay", "alipay.trade.page.pay":
		cents, err := alipay.Cents(biz["total_amount"])
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		no := biz["out_trade_no"]
		if _, ok := a.trades[no]; !ok {
			passback, _ := url.QueryUnescape(biz["passback_params"])
			a.trades[no] = &AlipayTrade{OutTradeNo: no, TradeNo: "2026" + strings.TrimPrefix(no, "pay_"), Passback: passback,
				NotifyURL: p.Get("notify_url"), Method: p.Get("method"), Subject: biz["subject"], Cents: cents}
		}
		fmt.Fprintf(w, "<html><body>Pay %s yuan to %s</body></html>", biz["total_amount"], a.AppID)
	case "alipay.trade.refund":
		a.calls++
		t, ok := a.trades[biz["out_trade_no"]]
		cents, err := alipay.Cents(biz["refund_amount"])
		if !ok || err != nil {
			a.answer(w, "alipay_trade_refund_response", map[string]string{"code": "40004", "msg": "Business Failed", "sub_code": "ACQ.TRADE_NOT_EXIST"})
			return
		}
		change := "N"
		if _, done := a.refunds[biz["out_request_no"]]; !done {
			if t.RefundedCents+cents > t.Cents {
				a.answer(w, "alipay_trade_refund_response", map[string]string{"code": "40004", "msg": "Business Failed",
					"sub_code": "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL"})
				return
			}
			a.refunds[biz["out_request_no"]] = cents
			t.RefundedCents += cents
			change = "Y"
		}
		a.answer(w, "alipay_trade_refund_response", map[string]string{"code": "10000", "msg": "Success", "out_trade_no": t.OutTradeNo,
			"trade_no": t.TradeNo, "fund_change": change, "refund_fee": alipay.Yuan(t.RefundedCents)})
	default:
		a.answer(w, "error_response", map[string]string{"code": "40004", "msg": "Business Failed", "sub_code": "isv.invalid-method"})
	}
}

// answer writes a signed answer under node, as Alipay does: the signature covers the node's
// JSON text exactly as sent.
func (a *Alipay) answer(w http.ResponseWriter, node string, fields map[string]string) {
	raw, _ := json.Marshal(fields)
	sig, _ := alipay.Sign(a.Key, string(raw))
	fmt.Fprintf(w, `{"%s":%s,"sign":%q}`, node, raw, sig)
}

// Notice is a notice of the trade outTradeNo in status, for cents, with fields added (or
// overriding), signed with key (nil: Alipay's).
func (a *Alipay) Notice(key *rsa.PrivateKey, outTradeNo, status string, cents int64, fields map[string]string) url.Values {
	a.mu.Lock()
	t, ok := a.trades[outTradeNo]
	a.mu.Unlock()
	f := url.Values{}
	f.Set("notify_time", "2026-12-05 10:00:00")
	f.Set("notify_type", "trade_status_sync")
	f.Set("notify_id", "ntf"+outTradeNo+status)
	f.Set("app_id", a.AppID)
	f.Set("charset", "utf-8")
	f.Set("version", "1.0")
	f.Set("out_trade_no", outTradeNo)
	f.Set("trade_status", status)
	f.Set("total_amount", alipay.Yuan(cents))
	if ok {
		f.Set("trade_no", t.TradeNo)
		if t.Passback != "" {
			f.Set("passback_params", url.QueryEscape(t.Passback))
		}
	}
	for k, v := range fields {
		f.Set(k, v)
	}
	if key == nil {
		key = a.Key
	}
	f.Set("sign_type", "RSA2")
	sig, _ := alipay.Sign(key, alipay.Content(f, "sign_type"))
	f.Set("sign", sig)
	return f
}

// Post posts the notice form to notifyURL as Alipay does, and returns the answer's body.
func Post(notifyURL, contentType string, header http.Header, body []byte) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, notifyURL, strings.NewReader(string(body)))
	if err != nil {
		return 0, "", err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// Notify posts form to the trade's notify URL (or notifyURL when the trade is unknown) and
// returns Alipay's view of the answer: its body.
func (a *Alipay) Notify(notifyURL string, form url.Values) (string, error) {
	if t, ok := a.Trade(form.Get("out_trade_no")); ok && t.NotifyURL != "" {
		notifyURL = t.NotifyURL
	}
	_, body, err := Post(notifyURL, "application/x-www-form-urlencoded; charset=utf-8", nil, []byte(form.Encode()))
	return body, err
}
