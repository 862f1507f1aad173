package wechatpay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"seckill/internal/sale"
)

// Provider is WeChat Pay as a node's payment provider: the sale's port (sale.PaymentProvider)
// and the reader of the notices WeChat Pay posts to POST /api/payments/wechatpay.
type Provider struct {
	*Client
}

// Name is WeChat Pay's name in the settings and the API.
const Name = "wechatpay"

// Takes implements sale.PaymentProvider: WeChat Pay takes cny alone (the shop's own, "", is cny).
func (Provider) Takes(currency string) bool { return currency == "" || currency == "cny" }

// Name implements sale.PaymentProvider.
func (Provider) Name() string { return Name }

// PayURL implements sale.PaymentProvider: a Native order's code_url on a desktop (the page
// shows it as a QR code for the buyer's WeChat to scan), an H5 order's h5_url on a phone. Our
// payment id is its out_trade_no and our order token its attach: the same payment asked again
// is the same order at WeChat Pay, which answers it with the same URL.
func (p Provider) PayURL(ctx context.Context, c sale.Checkout) (string, error) {
	o := Order{OutTradeNo: c.Payment.ID, Cents: c.Payment.AmountCents, Description: c.Subject, Expire: c.Expire,
		ClientIP: c.ClientIP, Attach: c.Payment.OrderToken}
	if c.Mobile {
		return p.H5(ctx, o)
	}
	return p.Native(ctx, o)
}

// Refund implements sale.PaymentProvider with a domestic refund of all the payment received,
// refundID its out_refund_no. WeChat Pay answers SUCCESS (done), or PROCESSING (its
// REFUND.SUCCESS notice follows, or the same refund asked again says SUCCESS).
func (p Provider) Refund(ctx context.Context, pay sale.Payment, refundID string) (bool, error) {
	r, err := p.Client.Refund(ctx, pay.ID, refundID, pay.ReceivedCents, pay.ReceivedCents)
	if err != nil {
		return false, err
	}
	switch r.Status {
	case "SUCCESS":
		return true, nil
	case "PROCESSING":
		return false, nil
	default:
		return false, fmt.Errorf("wechatpay: refund %s is %s", refundID, r.Status)
	}
}

// Notice reads a notice WeChat Pay posted, checked and opened first (ParseNotice): money taken
// (TRANSACTION.SUCCESS with trade_state SUCCESS) or a refund made (REFUND.SUCCESS); ok is
// false for the other events.
func (p Provider) Notice(h http.Header, body []byte) (n sale.PaymentNotice, ok bool, err error) {
	w, err := p.ParseNotice(h, body)
	if err != nil {
		return n, false, err
	}
	n.Provider = Name
	switch {
	case w.Transaction != nil && w.EventType == TransactionSuccess && w.Transaction.TradeState == "SUCCESS":
		t := w.Transaction
		n.PaymentID, n.OrderToken, n.ProviderRef, n.AmountCents = t.OutTradeNo, t.Attach, t.TransactionID, t.Amount.Total
		n.Outcome = sale.OutcomeSucceeded
	case w.Refund != nil && w.EventType == RefundSuccess && w.Refund.RefundStatus == "SUCCESS":
		r := w.Refund
		n.PaymentID, n.ProviderRef, n.AmountCents = r.OutTradeNo, r.TransactionID, r.Amount.Refund
		n.Outcome = sale.OutcomeRefunded
	default:
		return n, false, nil
	}
	return n, true, nil
}

// Answer writes what WeChat Pay expects: 204 once a notice is applied (or was, or says nothing
// to apply); a refusal, which it sends again later, is a 4xx (a 5xx when we could not apply it
// for now) with {"code":"FAIL","message":...}.
func (Provider) Answer(w http.ResponseWriter, err error) {
	if err == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	status, msg := http.StatusBadRequest, err.Error()
	if errors.Is(err, sale.ErrBusy) { // what failed is ours to know
		status, msg = http.StatusInternalServerError, "busy: send it again later"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"code": "FAIL", "message": msg})
}
