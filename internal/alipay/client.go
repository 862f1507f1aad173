package alipay

import (
	"bytes"
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"seckill/internal/rsasig"
)

// Client is one Alipay app: its id and key, Alipay's public key, and where to reach the gateway.
type Client struct {
	AppID     string
	Key       *rsa.PrivateKey // the app's private key: signs what the node sends
	AlipayKey *rsa.PublicKey  // Alipay's public key: checks what Alipay sends
	Gateway   string          // "": DefaultGateway
	// NotifyURL is where Alipay posts its notices: the node's POST /api/payments/alipay.
	NotifyURL string
	HTTP      *http.Client     // nil: http.DefaultClient
	Now       func() time.Time // nil: time.Now
}

func (c *Client) gateway() string {
	if c.Gateway == "" {
		return DefaultGateway
	}
	return c.Gateway
}

func (c *Client) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

// params are the common parameters of a call of method, with its business content, unsigned.
func (c *Client) params(method string, biz any) (url.Values, error) {
	content, err := json.Marshal(biz)
	if err != nil {
		return nil, err
	}
	p := url.Values{}
	p.Set("app_id", c.AppID)
	p.Set("method", method)
	p.Set("format", "JSON")
	p.Set("charset", "utf-8")
	p.Set("sign_type", "RSA2")
	p.Set("timestamp", c.now().In(rsasig.Beijing).Format(timeLayout))
	p.Set("version", "1.0")
	p.Set("biz_content", string(content))
	return p, nil
}

// sign adds p's signature to p.
func (c *Client) sign(p url.Values) error {
	sig, err := Sign(c.Key, Content(p))
	if err != nil {
		return err
	}
	p.Set("sign", sig)
	return nil
}

// Trade is a payment to start: our payment id as Alipay's out_trade_no, what to take and until
// when, and where the buyer comes back.
type Trade struct {
	OutTradeNo string
	Cents      int64
	Subject    string
	ReturnURL  string
	Expire     time.Time // time_expire: Alipay closes the trade then
	Desktop    bool      // alipay.trade.page.pay (a desktop's browser) rather than wap.pay (a phone's)
	// Passback is passback_params: what Alipay's notices of the trade carry back, signed (our
	// order token).
	Passback string
}

// PayURL is where the buyer pays t: the gateway with the signed parameters of
// alipay.trade.wap.pay (or page.pay) in its query. No call is made: Alipay checks the signature
// when the buyer arrives.
func (c *Client) PayURL(t Trade) (string, error) {
	method, product := "alipay.trade.wap.pay", "QUICK_WAP_WAY"
	if t.Desktop {
		method, product = "alipay.trade.page.pay", "FAST_INSTANT_TRADE_PAY"
	}
	if t.Cents <= 0 || t.Cents > MaxCents {
		return "", fmt.Errorf("alipay: %d cents is no amount Alipay takes", t.Cents)
	}
	biz := map[string]string{"out_trade_no": t.OutTradeNo, "total_amount": Yuan(t.Cents), "subject": t.Subject,
		"product_code": product}
	if !t.Expire.IsZero() {
		biz["time_expire"] = t.Expire.In(rsasig.Beijing).Format(timeLayout)
	}
	if t.Passback != "" {
		biz["passback_params"] = url.QueryEscape(t.Passback) // Alipay's rule: sent URL-encoded
	}
	p, err := c.params(method, biz)
	if err != nil {
		return "", err
	}
	p.Set("notify_url", c.NotifyURL)
	p.Set("return_url", t.ReturnURL)
	if err := c.sign(p); err != nil {
		return "", err
	}
	return c.gateway() + "?" + p.Encode(), nil
}

// The trade states a notice reports.
const (
	TradeSuccess  = "TRADE_SUCCESS"  // paid; may still be refunded
	TradeFinished = "TRADE_FINISHED" // paid, and past refunds
	TradeClosed   = "TRADE_CLOSED"   // closed unpaid, or refunded in full
	WaitBuyerPay  = "WAIT_BUYER_PAY" // created, not paid
)

// Notice is Alipay's asynchronous notice of a trade, checked.
type Notice struct {
	NotifyID    string
	OutTradeNo  string // our payment id
	TradeNo     string // Alipay's
	TradeStatus string
	Cents       int64 // total_amount
	// RefundCents is refund_fee, what was refunded of the trade so far (0: none).
	RefundCents int64
	// Passback is the trade's passback_params, decoded.
	Passback string
}

// Paid says the notice is money taken.
func (n Notice) Paid() bool { return n.TradeStatus == TradeSuccess || n.TradeStatus == TradeFinished }

// ParseNotice checks a notice's form (the POST body Alipay sends the notify URL) and reads it:
// first the signature, over every parameter but sign and sign_type, with Alipay's key; then
// that it is for this app; then its fields. Errors: ErrSignature, or one naming what is wrong.
func (c *Client) ParseNotice(form url.Values) (Notice, error) {
	if err := Verify(c.AlipayKey, Content(form, "sign_type"), form.Get("sign")); err != nil {
		return Notice{}, err
	}
	if st := form.Get("sign_type"); st != "RSA2" {
		return Notice{}, fmt.Errorf("alipay: sign_type %q, not RSA2", st)
	}
	if id := form.Get("app_id"); id != c.AppID {
		return Notice{}, fmt.Errorf("alipay: a notice for app %q, not ours", id)
	}
	n := Notice{NotifyID: form.Get("notify_id"), OutTradeNo: form.Get("out_trade_no"), TradeNo: form.Get("trade_no"),
		TradeStatus: form.Get("trade_status")}
	if n.OutTradeNo == "" || n.TradeStatus == "" {
		return Notice{}, errors.New("alipay: a notice without out_trade_no or trade_status")
	}
	var err error
	if n.Passback, err = url.QueryUnescape(form.Get("passback_params")); err != nil {
		return Notice{}, fmt.Errorf("alipay: passback_params: %w", err)
	}
	if n.Cents, err = Cents(form.Get("total_amount")); err != nil {
		return Notice{}, err
	}
	if fee := form.Get("refund_fee"); fee != "" {
		if n.RefundCents, err = Cents(fee); err != nil {
			return Notice{}, err
		}
	}
	return n, nil
}

// Refund is a refund made: Alipay's answer to alipay.trade.refund.
type Refund struct {
	// Changed is fund_change: "Y" when this call moved the money, "N" when an earlier call with
	// the same out_request_no already did (a retry).
	Changed bool
	// RefundedCents is refund_fee: what the trade has refunded in all.
	RefundedCents int64
}

// APIError is a call Alipay answered with a business error.
type APIError struct {
	Code, Msg, SubCode, SubMsg string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("alipay: %s %s (%s %s)", e.Code, e.Msg, e.SubCode, e.SubMsg)
}

// Refund asks Alipay to give back cents of trade outTradeNo. outRequestNo names this refund:
// the same one asked again (a retry after a lost answer) refunds once. Errors: *APIError (Alipay
// said no), ErrSignature (an answer not signed by Alipay), or the network's.
func (c *Client) Refund(ctx context.Context, outTradeNo, outRequestNo string, cents int64) (Refund, error) {
	p, err := c.params("alipay.trade.refund", map[string]string{"out_trade_no": outTradeNo,
		"refund_amount": Yuan(cents), "out_request_no": outRequestNo})
	if err != nil {
		return Refund{}, err
	}
	var out struct {
		Code         string `json:"code"`
		Msg          string `json:"msg"`
		SubCode      string `json:"sub_code"`
		SubMsg       string `json:"sub_msg"`
		FundChange   string `json:"fund_change"`
		RefundFee    string `json:"refund_fee"`
		OutTradeNo   string `json:"out_trade_no"`
		OutRequestNo string `json:"out_request_no"`
	}
	if err := c.call(ctx, p, "alipay_trade_refund_response", &out); err != nil {
		return Refund{}, err
	}
	if out.Code != "10000" {
		return Refund{}, &APIError{Code: out.Code, Msg: out.Msg, SubCode: out.SubCode, SubMsg: out.SubMsg}
	}
	if out.OutTradeNo != "" && out.OutTradeNo != outTradeNo {
		return Refund{}, fmt.Errorf("alipay: the refund's answer names trade %q, not %q", out.OutTradeNo, outTradeNo)
	}
	fee, err := Cents(out.RefundFee)
	if err != nil {
		return Refund{}, err
	}
	return Refund{Changed: out.FundChange == "Y", RefundedCents: fee}, nil
}

// call posts the signed p to the gateway and reads the answer's node (method's name with dots as
// underscores, then _response) into out, once its signature checks: Alipay signs the node's JSON
// text exactly as sent.
func (c *Client) call(ctx context.Context, p url.Values, node string, out any) error {
	if err := c.sign(p); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.gateway(), strings.NewReader(p.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded;charset=utf-8")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("alipay: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("alipay: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("alipay: the gateway answered %d", resp.StatusCode)
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("alipay: the answer is not JSON: %w", err)
	}
	raw, ok := env[node]
	if !ok {
		raw, ok = env["error_response"]
	}
	var sig string
	if s, has := env["sign"]; has {
		json.Unmarshal(s, &sig)
	}
	if !ok || Verify(c.AlipayKey, string(bytes.TrimSpace(raw)), sig) != nil {
		return ErrSignature
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("alipay: the answer's %s: %w", node, err)
	}
	return nil
}
