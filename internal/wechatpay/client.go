package wechatpay

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"seckill/internal/rsasig"
)

// Client is one merchant: its ids, its key and certificate serial, WeChat Pay's keys, the API v3
// key, and where to reach the API.
type Client struct {
	MchID, AppID string
	Serial       string          // the merchant certificate's serial: names Key to WeChat Pay
	Key          *rsa.PrivateKey // the merchant's private key: signs what the node sends
	Verifier     Verifier        // WeChat Pay's keys: check what it sends
	APIv3Key     []byte          // 32 bytes: opens the notices' resources
	API          string          // "": DefaultAPI
	// NotifyURL is where WeChat Pay posts its notices: the node's POST /api/payments/wechatpay.
	NotifyURL string
	HTTP      *http.Client // nil: http.DefaultClient
}

// Order is a payment to start: our payment id as out_trade_no, what to take (fen) and until when.
type Order struct {
	OutTradeNo  string
	Cents       int64
	Description string
	Expire      time.Time
	// ClientIP is the buyer's address: an H5 order (a phone's browser) needs it, a Native one
	// (a QR code on a desktop) does not.
	ClientIP string
	// Attach is what WeChat Pay's notice of the payment carries back (our order token).
	Attach string
}

func (o Order) body(c *Client) map[string]any {
	b := map[string]any{"appid": c.AppID, "mchid": c.MchID, "description": o.Description, "out_trade_no": o.OutTradeNo,
		"notify_url": c.NotifyURL, "amount": map[string]any{"total": o.Cents, "currency": "CNY"}}
	if !o.Expire.IsZero() {
		b["time_expire"] = o.Expire.In(rsasig.Beijing).Format(time.RFC3339)
	}
	if o.Attach != "" {
		b["attach"] = o.Attach
	}
	return b
}

// Native starts o as a Native order and returns its code_url, which the buyer's WeChat scans.
func (c *Client) Native(ctx context.Context, o Order) (string, error) {
	var out struct {
		CodeURL string `json:"code_url"`
	}
	if err := c.call(ctx, http.MethodPost, "/v3/pay/transactions/native", o.body(c), &out); err != nil {
		return "", err
	}
	if out.CodeURL == "" {
		return "", errors.New("wechatpay: the order's answer has no code_url")
	}
	return out.CodeURL, nil
}

// H5 starts o as an H5 order and returns its h5_url, where a phone's browser pays.
func (c *Client) H5(ctx context.Context, o Order) (string, error) {
	b := o.body(c)
	b["scene_info"] = map[string]any{"payer_client_ip": o.ClientIP, "h5_info": map[string]string{"type": "Wap"}}
	var out struct {
		H5URL string `json:"h5_url"`
	}
	if err := c.call(ctx, http.MethodPost, "/v3/pay/transactions/h5", b, &out); err != nil {
		return "", err
	}
	if out.H5URL == "" {
		return "", errors.New("wechatpay: the order's answer has no h5_url")
	}
	return out.H5URL, nil
}

// Refund is a refund as WeChat Pay reports it.
type Refund struct {
	RefundID    string `json:"refund_id"`
	OutRefundNo string `json:"out_refund_no"`
	OutTradeNo  string `json:"out_trade_no"`
	// Status is SUCCESS, PROCESSING (the money is on its way: a REFUND.SUCCESS notice follows),
	// CLOSED or ABNORMAL.
	Status string `json:"status"`
	Amount struct {
		Refund int64 `json:"refund"`
		Total  int64 `json:"total"`
	} `json:"amount"`
}

// Refund asks WeChat Pay to give back cents of trade outTradeNo, whose total was total.
// outRefundNo names this refund: asked again (a retry after a lost answer), it refunds once.
func (c *Client) Refund(ctx context.Context, outTradeNo, outRefundNo string, cents, total int64) (Refund, error) {
	b := map[string]any{"out_trade_no": outTradeNo, "out_refund_no": outRefundNo, "notify_url": c.NotifyURL,
		"amount": map[string]any{"refund": cents, "total": total, "currency": "CNY"}}
	var out Refund
	if err := c.call(ctx, http.MethodPost, "/v3/refund/domestic/refunds", b, &out); err != nil {
		return Refund{}, err
	}
	if out.OutRefundNo != outRefundNo {
		return Refund{}, fmt.Errorf("wechatpay: the refund's answer names refund %q, not %q", out.OutRefundNo, outRefundNo)
	}
	return out, nil
}

// APIError is an answer of 4xx or 5xx: WeChat Pay's code and message.
type APIError struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *APIError) Error() string {
	return fmt.Sprintf("wechatpay: %d %s: %s", e.Status, e.Code, e.Message)
}

// Authorization is the header that signs a request of method to pathAndQuery with body, at
// timestamp with nonce.
func (c *Client) Authorization(method, pathAndQuery string, body []byte, timestamp, nonce string) (string, error) {
	sig, err := Sign(c.Key, RequestMessage(method, pathAndQuery, timestamp, nonce, body))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf(`WECHATPAY2-SHA256-RSA2048 mchid="%s",nonce_str="%s",signature="%s",timestamp="%s",serial_no="%s"`,
		c.MchID, nonce, sig, timestamp, c.Serial), nil
}

// call sends a signed request and reads its answer into out once the answer's signature checks.
// Errors: *APIError, ErrSerial, ErrStale, ErrSignature, or the network's.
func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	api := c.API
	if api == "" {
		api = DefaultAPI
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(api, "/")+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	now := time.Now
	if c.Verifier.Now != nil {
		now = c.Verifier.Now
	}
	auth, err := c.Authorization(method, path, body, strconv.FormatInt(now().Unix(), 10), nonce())
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("wechatpay: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("wechatpay: %w", err)
	}
	if resp.StatusCode >= 300 {
		e := &APIError{Status: resp.StatusCode}
		json.Unmarshal(data, e)
		return e
	}
	if err := c.Verifier.Verify(resp.Header, data); err != nil {
		return err
	}
	if out == nil || len(data) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("wechatpay: the answer: %w", err)
	}
	return nil
}

// nonce is a request's random nonce_str.
func nonce() string {
	var b [16]byte
	rand.Read(b[:])
	return strings.ToUpper(hex.EncodeToString(b[:]))
}

// The event types of the notices the node takes.
const (
	TransactionSuccess = "TRANSACTION.SUCCESS"
	RefundSuccess      = "REFUND.SUCCESS"
	RefundAbnormal     = "REFUND.ABNORMAL"
	RefundClosed       = "REFUND.CLOSED"
)

// Transaction is a notice's transaction: a payment's outcome.
type Transaction struct {
	MchID         string `json:"mchid"`
	AppID         string `json:"appid"`
	OutTradeNo    string `json:"out_trade_no"`
	TransactionID string `json:"transaction_id"`
	TradeState    string `json:"trade_state"` // SUCCESS: money in
	Attach        string `json:"attach"`
	Amount        struct {
		Total    int64  `json:"total"` // fen
		Currency string `json:"currency"`
	} `json:"amount"`
}

// RefundNotice is a notice's refund: a refund's outcome.
type RefundNotice struct {
	MchID         string `json:"mchid"`
	OutTradeNo    string `json:"out_trade_no"`
	TransactionID string `json:"transaction_id"`
	OutRefundNo   string `json:"out_refund_no"`
	RefundID      string `json:"refund_id"`
	RefundStatus  string `json:"refund_status"` // SUCCESS, CLOSED, ABNORMAL
	Amount        struct {
		Total  int64 `json:"total"`
		Refund int64 `json:"refund"`
	} `json:"amount"`
}

// Notice is a checked, decrypted notice: Transaction for TRANSACTION.*, Refund for REFUND.*.
type Notice struct {
	ID          string
	EventType   string
	Transaction *Transaction
	Refund      *RefundNotice
}

// ParseNotice checks a notice (the headers and raw body WeChat Pay posted) and opens it: its
// signature first (ErrSerial, ErrStale, ErrSignature), then its resource (ErrDecrypt), then that
// it is for this merchant. The probe notices WeChat Pay sends to test the endpoint carry a
// signature that does not verify, and are refused.
func (c *Client) ParseNotice(h http.Header, body []byte) (Notice, error) {
	if err := c.Verifier.Verify(h, body); err != nil {
		return Notice{}, err
	}
	var env struct {
		ID           string   `json:"id"`
		EventType    string   `json:"event_type"`
		ResourceType string   `json:"resource_type"`
		Resource     Resource `json:"resource"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return Notice{}, fmt.Errorf("wechatpay: the notice is not JSON: %w", err)
	}
	plain, err := env.Resource.Decrypt(c.APIv3Key)
	if err != nil {
		return Notice{}, err
	}
	n := Notice{ID: env.ID, EventType: env.EventType}
	var mch string
	switch {
	case strings.HasPrefix(env.EventType, "TRANSACTION."):
		n.Transaction = &Transaction{}
		err = json.Unmarshal(plain, n.Transaction)
		mch = n.Transaction.MchID
		if err == nil && n.Transaction.AppID != c.AppID {
			return Notice{}, fmt.Errorf("wechatpay: a notice for app %q, not ours", n.Transaction.AppID)
		}
	case strings.HasPrefix(env.EventType, "REFUND."):
		n.Refund = &RefundNotice{}
		err = json.Unmarshal(plain, n.Refund)
		mch = n.Refund.MchID
	default:
		return n, nil // another event: nothing to apply
	}
	if err != nil {
		return Notice{}, fmt.Errorf("wechatpay: the notice's resource: %w", err)
	}
	if mch != c.MchID {
		return Notice{}, fmt.Errorf("wechatpay: a notice for merchant %q, not ours", mch)
	}
	return n, nil
}
