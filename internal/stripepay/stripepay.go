// Package stripepay speaks Stripe for seckill's payments, through Stripe's own Go library
// (github.com/stripe/stripe-go): a Checkout Session that starts a payment, the check of its
// webhook events, and the refund call.
//
// Our payment id is the session's client_reference_id, and the session's and its
// PaymentIntent's metadata carry payment_id and order_token, so an event finds its payment
// without another lookup. A session is created with the payment id as its Idempotency-Key (two
// clicks, one session), a refund with the refund's own id (a retry refunds once). An event is
// believed only once its Stripe-Signature verifies with the endpoint's secret (several v1
// values while a secret rolls; five minutes' tolerance).
package stripepay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	stripe "github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"
)

// Tolerance is how old an event's signature may be.
const Tolerance = 5 * time.Minute

// Client is one Stripe account: its secret key, where its API is, and the webhook endpoint's
// signing secret.
type Client struct {
	sc            *stripe.Client
	webhookSecret string
}

// New returns the client of the account of key, on the API at apiURL ("": Stripe's), whose
// webhook endpoint signs with webhookSecret.
func New(key, apiURL, webhookSecret string, hc *http.Client) *Client {
	cfg := &stripe.BackendConfig{HTTPClient: hc, LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
		MaxNetworkRetries: stripe.Int64(2)}
	if apiURL != "" {
		cfg.URL = stripe.String(apiURL)
	}
	api := stripe.GetBackendWithConfig(stripe.APIBackend, cfg)
	return &Client{sc: stripe.NewClient(key, stripe.WithBackends(&stripe.Backends{API: api, Connect: api, Uploads: api, MeterEvents: api})),
		webhookSecret: webhookSecret}
}

// Session is a payment to start.
type Session struct {
	PaymentID, OrderToken string
	Cents                 int64
	Currency              string // ISO 4217, lower case: "usd", "cny"
	Name                  string // what the buyer pays for
	SuccessURL, CancelURL string
	// Expire is when the order's payment window closes: the session expires then, or as
	// near as Stripe allows (SessionExpiry).
	Expire time.Time
}

// SessionExpiry is when a session started at now for a window closing at expire expires:
// expire, kept within what Stripe takes (30 minutes to 24 hours after the session's creation;
// a minute's margin each side for the clocks). A payment that comes after its window all the
// same is owed back, and refunded.
func SessionExpiry(expire, now time.Time) time.Time {
	if earliest := now.Add(31 * time.Minute); expire.Before(earliest) {
		return earliest
	}
	if latest := now.Add(24*time.Hour - time.Minute); expire.After(latest) {
		return latest
	}
	return expire
}

// Checkout creates (or, for a payment asked again, finds) the Checkout Session of s and returns
// where the buyer pays (the session's url) and the session's id. Its Idempotency-Key is the
// payment id: Stripe answers the same payment asked again with the same session.
func (c *Client) Checkout(ctx context.Context, s Session) (url, id string, err error) {
	meta := map[string]string{"payment_id": s.PaymentID, "order_token": s.OrderToken}
	p := &stripe.CheckoutSessionCreateParams{
		Mode:              stripe.String(string(stripe.CheckoutSessionModePayment)),
		ClientReferenceID: stripe.String(s.PaymentID),
		SuccessURL:        stripe.String(s.SuccessURL),
		CancelURL:         stripe.String(s.CancelURL),
		Metadata:          meta,
		PaymentIntentData: &stripe.CheckoutSessionCreatePaymentIntentDataParams{Metadata: meta},
		LineItems: []*stripe.CheckoutSessionCreateLineItemParams{{
			Quantity: stripe.Int64(1),
			PriceData: &stripe.CheckoutSessionCreateLineItemPriceDataParams{
				Currency:    stripe.String(s.Currency),
				UnitAmount:  stripe.Int64(s.Cents),
				ProductData: &stripe.CheckoutSessionCreateLineItemPriceDataProductDataParams{Name: stripe.String(s.Name)},
			},
		}},
	}
	if !s.Expire.IsZero() {
		p.ExpiresAt = stripe.Int64(SessionExpiry(s.Expire, time.Now()).Unix())
	}
	p.Context = ctx
	p.SetIdempotencyKey(s.PaymentID)
	cs, err := c.sc.V1CheckoutSessions.Create(ctx, p)
	if err != nil {
		return "", "", fmt.Errorf("stripe: checkout session of %s: %w", s.PaymentID, err)
	}
	return cs.URL, cs.ID, nil
}

// Refund asks Stripe to give back cents of the payment of paymentIntent. refundID names this
// refund and is its Idempotency-Key: asked again (a retry after a lost answer), it refunds once. Done says the money went
// back now; otherwise a charge.refunded event will say so.
func (c *Client) Refund(ctx context.Context, paymentIntent, refundID string, cents int64) (done bool, err error) {
	p := &stripe.RefundCreateParams{PaymentIntent: stripe.String(paymentIntent), Amount: stripe.Int64(cents),
		Metadata: map[string]string{"refund_id": refundID}}
	p.Context = ctx
	p.SetIdempotencyKey(refundID)
	r, err := c.sc.V1Refunds.Create(ctx, p)
	if err != nil {
		return false, fmt.Errorf("stripe: refund %s: %w", refundID, err)
	}
	return r.Status == stripe.RefundStatusSucceeded, nil
}

// What an event says of a payment.
const (
	Paid     = "paid"     // the money was taken
	Closed   = "closed"   // the session expired, or its payment failed: nothing was taken
	Refunded = "refunded" // the money went back
	Ignored  = ""         // an event the node does not act on (answered 200 all the same)
)

// Notice is a checked event, read.
type Notice struct {
	EventID, Type string
	Outcome       string // Paid, Closed, Refunded or Ignored
	PaymentID     string
	OrderToken    string
	// Cents is what the event says was taken (Paid) or refunded in all (Refunded).
	Cents         int64
	PaymentIntent string
}

// ErrSignature says an event's Stripe-Signature does not verify: forged, altered, too old, or
// signed with another secret. Nothing in it was read.
var ErrSignature = errors.New("stripe: the event's signature does not verify")

// ParseEvent checks an event (the raw body and its Stripe-Signature header) and reads it.
func (c *Client) ParseEvent(body []byte, signature string) (Notice, error) {
	ev, err := webhook.ConstructEventWithOptions(body, signature, c.webhookSecret,
		webhook.ConstructEventOptions{Tolerance: Tolerance, IgnoreAPIVersionMismatch: true})
	if err != nil {
		return Notice{}, fmt.Errorf("%w: %v", ErrSignature, err)
	}
	n := Notice{EventID: ev.ID, Type: string(ev.Type)}
	switch ev.Type {
	case "checkout.session.completed", "checkout.session.async_payment_succeeded",
		"checkout.session.expired", "checkout.session.async_payment_failed":
		var cs stripe.CheckoutSession
		if err := json.Unmarshal(ev.Data.Raw, &cs); err != nil {
			return Notice{}, fmt.Errorf("stripe: event %s: %w", ev.ID, err)
		}
		n.PaymentID, n.OrderToken, n.Cents = cs.ClientReferenceID, cs.Metadata["order_token"], cs.AmountTotal
		if cs.PaymentIntent != nil {
			n.PaymentIntent = cs.PaymentIntent.ID
		}
		switch {
		case ev.Type == "checkout.session.expired" || ev.Type == "checkout.session.async_payment_failed":
			n.Outcome = Closed
		case cs.PaymentStatus == stripe.CheckoutSessionPaymentStatusPaid:
			n.Outcome = Paid
		} // completed but not yet paid (an asynchronous method): its async_payment_* event follows
	case "charge.refunded":
		var ch stripe.Charge
		if err := json.Unmarshal(ev.Data.Raw, &ch); err != nil {
			return Notice{}, fmt.Errorf("stripe: event %s: %w", ev.ID, err)
		}
		n.Outcome, n.PaymentID, n.OrderToken, n.Cents = Refunded, ch.Metadata["payment_id"], ch.Metadata["order_token"], ch.AmountRefunded
		if ch.PaymentIntent != nil {
			n.PaymentIntent = ch.PaymentIntent.ID
		}
	}
	if n.Outcome != Ignored && n.PaymentID == "" {
		return Notice{}, fmt.Errorf("stripe: event %s names no payment of ours", ev.ID)
	}
	return n, nil
}
