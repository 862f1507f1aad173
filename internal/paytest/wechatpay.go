package paytest

import (
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"seckill/internal/rsasig"
	"seckill/internal/wechatpay"
)

// WeChatPay is a fake WeChat Pay API v3 for a node's tests: Native and H5 orders (the same
// out_trade_no asked again answers the same URL) and domestic refunds (made once per
// out_refund_no), every request's Authorization checked with the merchant's public key, every
// answer signed with the platform key. It writes WeChat Pay's notices, sealed with the API v3
// key and signed with the platform key.
type WeChatPay struct {
	MchID, AppID   string
	MerchantSerial string
	MerchantKey    *rsa.PublicKey
	Serial         string          // the platform key's id
	Key            *rsa.PrivateKey // the platform key
	APIv3Key       []byte

	srv     *httptest.Server
	mu      sync.Mutex
	orders  map[string]*WeChatOrder
	refunds map[string]*wechatRefund
	// processing is how many times a refund answers PROCESSING before SUCCESS.
	processing int
	calls      int
	refused    []string
}

// WeChatOrder is an order the node placed: what it asked for.
type WeChatOrder struct {
	OutTradeNo, TransactionID, Attach, NotifyURL, Kind, Description string
	Cents, RefundedCents                                            int64
}

type wechatRefund struct {
	outTradeNo string
	cents      int64
	asked      int
}

// StartWeChatPay serves a fake API until Close.
func StartWeChatPay(mchID, appID, merchantSerial string, merchantKey *rsa.PublicKey, serial string, key *rsa.PrivateKey, apiV3Key []byte) *WeChatPay {
	w := &WeChatPay{MchID: mchID, AppID: appID, MerchantSerial: merchantSerial, MerchantKey: merchantKey, Serial: serial, Key: key,
		APIv3Key: apiV3Key, orders: map[string]*WeChatOrder{}, refunds: map[string]*wechatRefund{}}
	w.srv = httptest.NewServer(w)
	return w
}

// URL is the API's base URL (SECKILL_WECHATPAY_API_URL).
func (w *WeChatPay) URL() string { return w.srv.URL }

// Close stops the API.
func (w *WeChatPay) Close() { w.srv.Close() }

// ProcessFirst makes each refund answer PROCESSING n times before SUCCESS.
func (w *WeChatPay) ProcessFirst(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.processing = n
}

// Order returns the order of outTradeNo.
func (w *WeChatPay) Order(outTradeNo string) (WeChatOrder, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	o, ok := w.orders[outTradeNo]
	if !ok {
		return WeChatOrder{}, false
	}
	return *o, true
}

// Refunds returns the refunds made (out_refund_no -> cents) and how many refund calls came.
func (w *WeChatPay) Refunds() (map[string]int64, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int64{}
	for k, r := range w.refunds {
		out[k] = r.cents
	}
	return out, w.calls
}

// Refused are the requests the API refused for their Authorization.
func (w *WeChatPay) Refused() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.refused...)
}

var authorization = regexp.MustCompile(`^WECHATPAY2-SHA256-RSA2048 mchid="([^"]+)",nonce_str="([^"]+)",signature="([^"]+)",timestamp="([^"]+)",serial_no="([^"]+)"$`)

func (w *WeChatPay) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	m := authorization.FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil || m[1] != w.MchID || m[5] != w.MerchantSerial ||
		!rsasig.Verify(w.MerchantKey, wechatpay.RequestMessage(r.Method, r.URL.RequestURI(), m[4], m[2], body), m[3]) {
		w.refused = append(w.refused, r.Method+" "+r.URL.Path)
		w.fail(rw, http.StatusUnauthorized, "SIGN_ERROR", "the signature does not verify")
		return
	}
	var in struct {
		AppID       string `json:"appid"`
		MchID       string `json:"mchid"`
		Description string `json:"description"`
		NotifyURL   string `json:"notify_url"`
		OutTradeNo  string `json:"out_trade_no"`
		OutRefundNo string `json:"out_refund_no"`
		Attach      string `json:"attach"`
		Amount      struct {
			Total  int64 `json:"total"`
			Refund int64 `json:"refund"`
		} `json:"amount"`
		SceneInfo *struct {
			PayerClientIP string `json:"payer_client_ip"`
		} `json:"scene_info"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		w.fail(rw, http.StatusBadRequest, "PARAM_ERROR", err.Error())
		return
	}
	var out any
	switch r.URL.Path {
	case "/v3/pay/transactions/native", "/v3/pay/transactions/h5":
		kind := strings.TrimPrefix(r.URL.Path, "/v3/pay/transactions/")
		switch {
		case in.AppID != w.AppID || in.MchID != w.MchID || in.NotifyURL == "" || in.Description == "":
			w.fail(rw, http.StatusBadRequest, "APPID_MCHID_NOT_MATCH", "appid and mchid do not match")
			return
		case kind == "h5" && (in.SceneInfo == nil || in.SceneInfo.PayerClientIP == ""):
			w.fail(rw, http.StatusBadRequest, "PARAM_ERROR", "scene_info is required")
			return
		case in.Amount.Total <= 0:
			w.fail(rw, http.StatusBadRequest, "PARAM_ERROR", "amount.total")
			return
		}
		o, ok := w.orders[in.OutTradeNo]
		if !ok {
			o = &WeChatOrder{OutTradeNo: in.OutTradeNo, TransactionID: "4200" + strconv.Itoa(len(w.orders)+1000), Attach: in.Attach,
				NotifyURL: in.NotifyURL, Kind: kind, Description: in.Description, Cents: in.Amount.Total}
			w.orders[in.OutTradeNo] = o
		} else if o.Cents != in.Amount.Total {
			w.fail(rw, http.StatusBadRequest, "INVALID_REQUEST", "the same out_trade_no with other parameters")
			return
		}
		if kind == "native" {
			out = map[string]string{"code_url": "weixin://wxpay/bizpayurl?pr=" + o.TransactionID}
		} else {
			out = map[string]string{"h5_url": "https://wx.tenpay.com/cgi-bin/mmpayweb-bin/checkmweb?prepay_id=" + o.TransactionID}
		}
	case "/v3/refund/domestic/refunds":
		w.calls++
		o, ok := w.orders[in.OutTradeNo]
		if !ok {
			w.fail(rw, http.StatusNotFound, "RESOURCE_NOT_EXISTS", "no such order")
			return
		}
		rf, ok := w.refunds[in.OutRefundNo]
		if !ok {
			if o.RefundedCents+in.Amount.Refund > o.Cents || in.Amount.Total != o.Cents {
				w.fail(rw, http.StatusBadRequest, "INVALID_REQUEST", "the refund's amount")
				return
			}
			rf = &wechatRefund{outTradeNo: in.OutTradeNo, cents: in.Amount.Refund}
			w.refunds[in.OutRefundNo] = rf
			o.RefundedCents += in.Amount.Refund
		}
		rf.asked++
		status := "SUCCESS"
		if rf.asked <= w.processing {
			status = "PROCESSING"
		}
		out = map[string]any{"refund_id": "5030" + in.OutRefundNo, "out_refund_no": in.OutRefundNo, "out_trade_no": in.OutTradeNo,
			"transaction_id": o.TransactionID, "status": status, "amount": map[string]any{"refund": rf.cents, "total": o.Cents}}
	default:
		w.fail(rw, http.StatusNotFound, "NOT_FOUND", r.URL.Path)
		return
	}
	data, _ := json.Marshal(out)
	for k, v := range w.sign(w.Key, time.Now(), data) {
		rw.Header()[k] = v
	}
	rw.Write(data)
}

func (w *WeChatPay) fail(rw http.ResponseWriter, status int, code, msg string) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(status)
	fmt.Fprintf(rw, `{"code":%q,"message":%q}`, code, msg)
}

// sign returns the headers that sign body with key at ts, named by the platform serial.
func (w *WeChatPay) sign(key *rsa.PrivateKey, ts time.Time, body []byte) http.Header {
	stamp, nonce := strconv.FormatInt(ts.Unix(), 10), "n"+strconv.FormatInt(ts.UnixNano(), 36)
	sig, _ := wechatpay.Sign(key, wechatpay.ResponseMessage(stamp, nonce, body))
	h := http.Header{}
	h.Set(wechatpay.HeaderTimestamp, stamp)
	h.Set(wechatpay.HeaderNonce, nonce)
	h.Set(wechatpay.HeaderSignature, sig)
	h.Set(wechatpay.HeaderSerial, w.Serial)
	return h
}

// Notice is a notice of event whose resource is plain, sealed with the API v3 key and signed
// with key (nil: the platform key) at ts: its headers and body.
func (w *WeChatPay) Notice(key *rsa.PrivateKey, ts time.Time, id, event string, plain any) (http.Header, []byte) {
	p, _ := json.Marshal(plain)
	aad := "transaction"
	if strings.HasPrefix(event, "REFUND.") {
		aad = "refund"
	}
	res, _ := wechatpay.Seal(w.APIv3Key, "fGqKLnVrWzCz", aad, p)
	res.OriginalType = aad
	body, _ := json.Marshal(map[string]any{"id": id, "create_time": ts.Format(time.RFC3339), "resource_type": "encrypt-resource",
		"event_type": event, "summary": "notice", "resource": res})
	if key == nil {
		key = w.Key
	}
	return w.sign(key, ts, body), body
}

// Paid is the transaction of the order outTradeNo, paid cents: what the fake took, which its
// refunds are then checked against (a total of another amount than the order's is a notice no
// real WeChat Pay sends, but one the node must square all the same).
func (w *WeChatPay) Paid(outTradeNo string, cents int64) map[string]any {
	w.mu.Lock()
	o, ok := w.orders[outTradeNo]
	if !ok {
		o = &WeChatOrder{OutTradeNo: outTradeNo}
	}
	if ok {
		o.Cents = cents
	}
	w.mu.Unlock()
	return map[string]any{"mchid": w.MchID, "appid": w.AppID, "out_trade_no": outTradeNo, "transaction_id": o.TransactionID,
		"trade_state": "SUCCESS", "attach": o.Attach, "amount": map[string]any{"total": cents, "payer_total": cents, "currency": "CNY"}}
}

// Refunded is the refund outRefundNo of the order outTradeNo, of cents.
func (w *WeChatPay) Refunded(outTradeNo, outRefundNo string, cents int64) map[string]any {
	o, _ := w.Order(outTradeNo)
	return map[string]any{"mchid": w.MchID, "out_trade_no": outTradeNo, "transaction_id": o.TransactionID, "out_refund_no": outRefundNo,
		"refund_id": "5030" + outRefundNo, "refund_status": "SUCCESS", "amount": map[string]any{"total": o.Cents, "refund": cents}}
}

// Notify posts a notice to the order's notify URL (notifyURL when the order is unknown): the
// answer's status and body.
func (w *WeChatPay) Notify(notifyURL, outTradeNo string, h http.Header, body []byte) (int, string, error) {
	if o, ok := w.Order(outTradeNo); ok && o.NotifyURL != "" {
		notifyURL = o.NotifyURL
	}
	return Post(notifyURL, "application/json", h, body)
}
