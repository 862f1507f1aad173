package stripepay

import (
	"context"
	"errors"
	"net/http"

	"seckill/internal/sale"
)

// Provider is Stripe as a node's payment provider: the sale's port (sale.PaymentProvider) and
// the reader of the events Stripe posts to POST /api/payments/stripe.
type Provider struct {
	*Client
	// Currency is what the shop's amounts are in (ISO 4217, lower case: "usd") when an activity
	// names none.
	Currency string
}

// Name is Stripe's name in the settings and the API.
const Name = "stripe"

// Takes implements sale.PaymentProvider: Stripe takes any currency ("": Currency).
func (Provider) Takes(string) bool { return true }

// Name implements sale.PaymentProvider.
func (Provider) Name() string { return Name }

// PayURL implements sale.PaymentProvider: the url of the payment's Checkout Session, created
// once (the payment id is its idempotency key: a second click finds the same session).
func (p Provider) PayURL(ctx context.Context, c sale.Checkout) (string, error) {
	currency := c.Currency
	if currency == "" {
		currency = p.Currency
	}
	u, _, err := p.Checkout(ctx, Session{PaymentID: c.Payment.ID, OrderToken: c.Payment.OrderToken, Cents: c.Payment.AmountCents,
		Currency: currency, Name: c.Subject, SuccessURL: c.ReturnURL, CancelURL: c.ReturnURL, Expire: c.Expire})
	return u, err
}

// Refund implements sale.PaymentProvider with a refund of the payment's PaymentIntent (its
// ProviderRef, from the notice of its money), of all it received.
func (p Provider) Refund(ctx context.Context, pay sale.Payment, refundID string) (bool, error) {
	if pay.ProviderRef == "" {
		return false, errors.New("stripe: the payment names no PaymentIntent to refund")
	}
	return p.Client.Refund(ctx, pay.ProviderRef, refundID, pay.ReceivedCents)
}

// Notice reads an event Stripe posted, checked first (ParseEvent): money taken, a session
// closed unpaid, or a charge refunded; ok is false for the other events.
func (p Provider) Notice(h http.Header, body []byte) (n sale.PaymentNotice, ok bool, err error) {
	e, err := p.ParseEvent(body, h.Get("Stripe-Signature"))
	if err != nil {
		return n, false, err
	}
	n = sale.PaymentNotice{Provider: Name, PaymentID: e.PaymentID, OrderToken: e.OrderToken, ProviderRef: e.PaymentIntent,
		AmountCents: e.Cents}
	switch e.Outcome {
	case Paid:
		n.Outcome = sale.OutcomeSucceeded
	case Closed:
		n.Outcome = sale.OutcomeFailed
	case Refunded:
		n.Outcome = sale.OutcomeRefunded
	default:
		return n, false, nil
	}
	return n, true, nil
}

// Answer writes what Stripe expects: 2xx once an event is applied (or was, or says nothing to
// apply); anything else makes it send the event again, for up to three days.
func (Provider) Answer(w http.ResponseWriter, err error) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case err == nil:
		w.Write([]byte(`{"received":true}`))
	case errors.Is(err, sale.ErrBusy):
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"error":"busy: send it again later"}`))
	default:
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"error":"refused"}`))
	}
}
