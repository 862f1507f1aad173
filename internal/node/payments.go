package node

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"seckill/internal/alipay"
	"seckill/internal/httpapi"
	"seckill/internal/relay"
	"seckill/internal/sale"
	"seckill/internal/signature"
	"seckill/internal/stripepay"
	"seckill/internal/wechatpay"
)

// Payments is the payment providers' part of a node's Config: which the buyers may pay at, each
// one's account, and where the providers send the buyers back and post their notices.
type Payments struct {
	// Providers name the providers the buyers pay at, the default first: signed (the generic
	// signed callback), stripe, alipay, wechatpay. None: the pay call pays.
	Providers []string
	// PublicURL is the node's public base URL ("https://shop.example"): the providers' notify
	// URLs are its /api/payments/{provider}. ReturnURL, when set, is where a provider sends the
	// buyer back; else the activity's page on PublicURL.
	PublicURL, ReturnURL string
	// Secret signs the generic provider's callbacks, and CheckoutURL is its checkout page.
	Secret, CheckoutURL string
	Stripe              Stripe
	Alipay              Alipay
	WeChatPay           WeChatPay
	// HTTP calls the providers' APIs (nil: a client with a 10 s timeout).
	HTTP *http.Client
}

// Stripe is a Stripe account: its secret key, the webhook endpoint's signing secret, its API
// ("": Stripe's) and the shop's currency (ISO 4217, lower case).
type Stripe struct {
	SecretKey, WebhookSecret, APIURL, Currency string
}

// Alipay is an Alipay app: its id, its private key's PEM file, Alipay's public key's PEM file
// and the gateway ("": Alipay's).
type Alipay struct {
	AppID, PrivateKey, PublicKey, Gateway string
}

// WeChatPay is a WeChat Pay merchant (API v3): its ids, its certificate's serial and private
// key's PEM file, WeChat Pay's public key's PEM file and serial, the API v3 key (32 bytes) and
// the API ("": WeChat Pay's).
type WeChatPay struct {
	MchID, AppID, Serial, PrivateKey, PlatformKey, PlatformSerial, APIv3Key, APIURL string
}

// The names of the providers, as the settings spell them.
var providerNames = []string{signature.ProviderName, stripepay.Name, alipay.Name, wechatpay.Name}

// payments are the providers of p, built: what the sale sends the buyers to and asks refunds
// of, the callback of the generic one and the notice readers of the others.
type payments struct {
	providers []sale.PaymentProvider
	callback  *httpapi.Callback
	notices   []httpapi.Notices
	refunds   bool // a provider makes refunds on request
}

// open builds the providers p names, their keys read. Errors name the setting at fault.
func (p Payments) open() (payments, error) {
	var out payments
	hc := p.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	notify := func(name string) string { return strings.TrimSuffix(p.PublicURL, "/") + "/api/payments/" + name }
	seen := map[string]bool{}
	for _, name := range p.Providers {
		if seen[name] {
			return out, fmt.Errorf("SECKILL_PAYMENT_PROVIDERS: %s twice", name)
		}
		seen[name] = true
		if name != signature.ProviderName && p.PublicURL == "" {
			return out, fmt.Errorf("SECKILL_PUBLIC_URL is required with the %s provider: its notices come to it", name)
		}
		var pr sale.PaymentProvider
		switch name {
		case signature.ProviderName:
			u, err := url.Parse(p.CheckoutURL)
			if err != nil || p.Secret == "" {
				return out, errors.New("the signed provider needs SECKILL_PAYMENT_SECRET and SECKILL_PAYMENT_URL")
			}
			pr = &signature.Provider{Secret: []byte(p.Secret), CheckoutURL: u}
			out.callback = &httpapi.Callback{Secret: []byte(p.Secret)}
		case stripepay.Name:
			s := p.Stripe
			if s.SecretKey == "" || s.WebhookSecret == "" {
				return out, errors.New("stripe needs SECKILL_STRIPE_SECRET_KEY and SECKILL_STRIPE_WEBHOOK_SECRET")
			}
			pr = stripepay.Provider{Client: stripepay.New(s.SecretKey, s.APIURL, s.WebhookSecret, hc), Currency: s.Currency}
		case alipay.Name:
			a := p.Alipay
			key, err := readKey("SECKILL_ALIPAY_PRIVATE_KEY", a.PrivateKey, alipay.ParsePrivateKey)
			if err != nil {
				return out, err
			}
			pub, err := readKey("SECKILL_ALIPAY_PUBLIC_KEY", a.PublicKey, alipay.ParsePublicKey)
			if err != nil {
				return out, err
			}
			if a.AppID == "" {
				return out, errors.New("alipay needs SECKILL_ALIPAY_APP_ID")
			}
			pr = alipay.Provider{Client: &alipay.Client{AppID: a.AppID, Key: key, AlipayKey: pub, Gateway: a.Gateway,
				NotifyURL: notify(alipay.Name), HTTP: hc}}
		case wechatpay.Name:
			w := p.WeChatPay
			key, err := readKey("SECKILL_WECHATPAY_PRIVATE_KEY", w.PrivateKey, wechatpay.ParsePrivateKey)
			if err != nil {
				return out, err
			}
			pub, err := readKey("SECKILL_WECHATPAY_PLATFORM_KEY", w.PlatformKey, wechatpay.ParsePublicKey)
			if err != nil {
				return out, err
			}
			switch {
			case w.MchID == "" || w.AppID == "" || w.Serial == "" || w.PlatformSerial == "":
				return out, errors.New("wechatpay needs SECKILL_WECHATPAY_MCH_ID, _APP_ID, _SERIAL and _PLATFORM_SERIAL")
			case len(w.APIv3Key) != 32:
				return out, errors.New("SECKILL_WECHATPAY_APIV3_KEY must be 32 bytes")
			}
			pr = wechatpay.Provider{Client: &wechatpay.Client{MchID: w.MchID, AppID: w.AppID, Serial: w.Serial, Key: key,
				Verifier: wechatpay.Verifier{Keys: map[string]*rsa.PublicKey{w.PlatformSerial: pub}}, APIv3Key: []byte(w.APIv3Key),
				API: w.APIURL, NotifyURL: notify(wechatpay.Name), HTTP: hc}}
		default:
			return out, fmt.Errorf("SECKILL_PAYMENT_PROVIDERS: %q is none of %s", name, strings.Join(providerNames, ", "))
		}
		out.providers = append(out.providers, pr)
		if n, ok := pr.(httpapi.Notices); ok {
			out.notices = append(out.notices, n)
			out.refunds = true
		}
	}
	return out, nil
}

// Check builds the providers p names, their keys read, and drops them: what seckill check does
// to refuse a configuration the node would refuse at its start. Errors name the setting at fault.
func (p Payments) Check() error {
	_, err := p.open()
	return err
}

// readKey reads the PEM file at path, named by setting, with parse.
func readKey[K any](setting, path string, parse func([]byte) (K, error)) (K, error) {
	var zero K
	if path == "" {
		return zero, fmt.Errorf("%s is required", setting)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", setting, err)
	}
	k, err := parse(data)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", setting, err)
	}
	return k, nil
}

// returnTo is where the providers send a buyer back from paying for activityID.
func (p Payments) returnTo(activityID string) string {
	if p.ReturnURL != "" {
		return p.ReturnURL
	}
	return strings.TrimSuffix(p.PublicURL, "/") + "/activity/" + url.PathEscape(activityID)
}

// refundSink is the loop that makes the refunds: a relay sink of the order.refund_requested
// events, which asks each payment's provider for its money back (sale.Payments.Refund). The
// relay makes it durable (the event stays due until the refund is made, across restarts),
// retried with backoff, parked after too many failures for an operator to replay, and run by
// one node at a time. A provider that makes no refunds on request leaves them to an operator.
type refundSink struct{ payments *sale.Payments }

// refundSinkName is the refunds' sink in the outbox: its deliveries, its lease, its metrics.
const refundSinkName = "refunds"

func (refundSink) Name() string { return refundSinkName }

func (r refundSink) Deliver(ctx context.Context, e sale.Event) error {
	if e.Type != sale.EventRefundRequested {
		return nil
	}
	err := r.payments.Refund(ctx, e.PaymentID)
	if errors.Is(err, sale.ErrNoRefunds) {
		return nil
	}
	return err
}

var _ relay.Sink = refundSink{}
