package signature

import (
	"context"
	"net/url"
	"strconv"

	"seckill/internal/sale"
)

// Provider is the generic payment provider of this scheme ("signed"): a shop's own checkout
// page, told which payment to take in a URL signed with Secret (SignCheckout), which calls the
// node back with a signed callback (POST /api/payments/callback). It makes no refunds on
// request: the order.refund_requested event tells the shop, and an operator records the refund.
type Provider struct {
	Secret []byte
	// CheckoutURL is the provider's page a buyer pays at; its own query is kept.
	CheckoutURL *url.URL
}

// ProviderName is the generic provider's name in the settings and the API.
const ProviderName = "signed"

// Name implements sale.PaymentProvider.
func (p *Provider) Name() string { return ProviderName }

// Takes implements sale.PaymentProvider: the shop's own page takes what it takes.
func (p *Provider) Takes(string) bool { return true }

// PayURL implements sale.PaymentProvider: the checkout page with the payment's payment_id,
// order_token and amount_cents added to its query, and their signature, so that a buyer who
// edits the URL is refused there. (Should a provider take another amount all the same, its
// notice is owed back: see sale.PaymentStore.Settle.) The same payment always gets the same URL.
func (p *Provider) PayURL(_ context.Context, c sale.Checkout) (string, error) {
	u := *p.CheckoutURL
	q := u.Query()
	q.Set("payment_id", c.Payment.ID)
	q.Set("order_token", c.Payment.OrderToken)
	q.Set("amount_cents", strconv.FormatInt(c.Payment.AmountCents, 10))
	q.Set(CheckoutParam, SignCheckout(p.Secret, c.Payment.ID, c.Payment.OrderToken, c.Payment.AmountCents))
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// Refund implements sale.PaymentProvider: sale.ErrNoRefunds.
func (p *Provider) Refund(context.Context, sale.Payment, string) (bool, error) {
	return false, sale.ErrNoRefunds
}
