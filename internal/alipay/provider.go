package alipay

import (
	"context"
	"net/http"
	"net/url"

	"seckill/internal/sale"
)

// Provider is Alipay as a node's payment provider: the sale's port (sale.PaymentProvider) and
// the reader of the notices Alipay posts to POST /api/payments/alipay.
type Provider struct {
	*Client
}

// Name is Alipay's name in the settings and the API.
const Name = "alipay"

// Takes implements sale.PaymentProvider: Alipay takes cny alone (the shop's own, "", is cny).
func (Provider) Takes(currency string) bool { return currency == "" || currency == "cny" }

// Name implements sale.PaymentProvider.
func (Provider) Name() string { return Name }

// PayURL implements sale.PaymentProvider: the gateway's signed page of the trade, our payment id
// its out_trade_no and our order token its passback_params. It is computed, not asked for: the
// same payment asked again is the same trade at Alipay.
func (p Provider) PayURL(_ context.Context, c sale.Checkout) (string, error) {
	return p.Client.PayURL(Trade{OutTradeNo: c.Payment.ID, Cents: c.Payment.AmountCents, Subject: c.Subject,
		ReturnURL: c.ReturnURL, Expire: c.Expire, Desktop: !c.Mobile, Passback: c.Payment.OrderToken})
}

// Refund implements sale.PaymentProvider with alipay.trade.refund of all the trade received,
// refundID its out_request_no. Alipay answers at once: a refund it took is done.
func (p Provider) Refund(ctx context.Context, pay sale.Payment, refundID string) (bool, error) {
	if _, err := p.Client.Refund(ctx, pay.ID, refundID, pay.ReceivedCents); err != nil {
		return false, err
	}
	return true, nil
}

// Notice reads a notice Alipay posted (form-encoded), checked first (ParseNotice): money taken
// (TRADE_SUCCESS, TRADE_FINISHED), a refund (refund_fee), or a trade closed unpaid
// (TRADE_CLOSED); ok is false for a trade still waiting for its buyer.
func (p Provider) Notice(_ http.Header, body []byte) (n sale.PaymentNotice, ok bool, err error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return n, false, err
	}
	a, err := p.ParseNotice(form)
	if err != nil {
		return n, false, err
	}
	n = sale.PaymentNotice{Provider: Name, PaymentID: a.OutTradeNo, OrderToken: a.Passback, ProviderRef: a.TradeNo,
		AmountCents: a.Cents}
	switch {
	case a.RefundCents > 0: // a refund made (in full: TRADE_CLOSED), which Alipay notifies too
		n.Outcome, n.AmountCents = sale.OutcomeRefunded, a.RefundCents
	case a.Paid():
		n.Outcome = sale.OutcomeSucceeded
	case a.TradeStatus == TradeClosed:
		n.Outcome = sale.OutcomeFailed
	default:
		return n, false, nil
	}
	return n, true, nil
}

// Answer writes what Alipay expects: exactly "success" once a notice is applied (or was, or
// says nothing to apply); anything else, "failure" here, makes it send the notice again.
func (Provider) Answer(w http.ResponseWriter, err error) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err != nil {
		w.Write([]byte("failure"))
		return
	}
	w.Write([]byte("success"))
}
