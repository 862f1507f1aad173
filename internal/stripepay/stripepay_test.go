package stripepay_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"seckill/internal/servers"
	"seckill/internal/stripepay"
	"seckill/internal/testtier"
)

const secret = "whsec_test_0123456789abcdef"

// event is a Stripe event of type typ over object, as JSON.
func event(typ string, object map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"id": "evt_1", "object": "event", "type": typ, "api_version": "2025-08-27.basil",
		"created": 1764864000, "data": map[string]any{"object": object}})
	return b
}

func session(status string) map[string]any {
	return map[string]any{"id": "cs_test_1", "object": "checkout.session", "client_reference_id": "pay_abc",
		"metadata": map[string]string{"payment_id": "pay_abc", "order_token": "g_tok"}, "amount_total": 1999,
		"payment_status": status, "payment_intent": "pi_1"}
}

// sign signs body with s at ts, as Stripe does.
func sign(body []byte, s string, ts time.Time) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: s, Timestamp: ts}).Header
}

func TestParseEvent(t *testing.T) {
	c := stripepay.New("sk_test_123", "", secret, nil)
	for name, tc := range map[string]struct {
		body    []byte
		outcome string
		cents   int64
	}{
		"a session paid":            {event("checkout.session.completed", session("paid")), stripepay.Paid, 1999},
		"a session paid later":      {event("checkout.session.async_payment_succeeded", session("paid")), stripepay.Paid, 1999},
		"a session not yet paid":    {event("checkout.session.completed", session("unpaid")), stripepay.Ignored, 1999},
		"a session expired":         {event("checkout.session.expired", session("unpaid")), stripepay.Closed, 1999},
		"an asynchronous failure":   {event("checkout.session.async_payment_failed", session("unpaid")), stripepay.Closed, 1999},
		"another event":             {event("customer.created", map[string]any{"id": "cus_1", "object": "customer"}), stripepay.Ignored, 0},
		"a charge refunded in full": {event("charge.refunded", map[string]any{"id": "ch_1", "object": "charge", "amount_refunded": 1999, "refunded": true, "payment_intent": "pi_1", "metadata": map[string]string{"payment_id": "pay_abc", "order_token": "g_tok"}}), stripepay.Refunded, 1999},
	} {
		n, err := c.ParseEvent(tc.body, sign(tc.body, secret, time.Now()))
		if err != nil || n.Outcome != tc.outcome || n.Cents != tc.cents || tc.outcome != stripepay.Ignored && (n.PaymentID != "pay_abc" || n.OrderToken != "g_tok" || n.PaymentIntent != "pi_1") {
			t.Errorf("%s: %+v, %v; want %q of %d cents", name, n, err, tc.outcome, tc.cents)
		}
	}

	body := event("checkout.session.completed", session("paid"))
	altered := []byte(strings.Replace(string(body), "1999", "1", 1))
	old := sign(body, secret, time.Now().Add(-6*time.Minute))
	// While a secret rolls, Stripe signs with both: one v1 value that verifies is enough.
	now := time.Now()
	rolling := fmt.Sprintf("t=%d,v1=%s,v1=%s", now.Unix(), hex.EncodeToString(webhook.ComputeSignature(now, body, "whsec_old")),
		hex.EncodeToString(webhook.ComputeSignature(now, body, secret)))
	if n, err := c.ParseEvent(body, rolling); err != nil || n.Outcome != stripepay.Paid {
		t.Errorf("signed with the old and the new secret: %+v, %v", n, err)
	}
	for name, tc := range map[string]struct {
		body   []byte
		header string
	}{
		"one byte changed":      {altered, sign(body, secret, time.Now())},
		"another secret":        {body, sign(body, "whsec_someone_else", time.Now())},
		"six minutes old":       {body, old},
		"no signature":          {body, ""},
		"a malformed signature": {body, "t=abc,v1=zz"},
	} {
		if n, err := c.ParseEvent(tc.body, tc.header); !errors.Is(err, stripepay.ErrSignature) {
			t.Errorf("%s: %+v, %v; want ErrSignature", name, n, err)
		}
	}
	// A signed event of money that names no payment of ours is not a notice.
	stray := session("paid")
	delete(stray, "client_reference_id")
	b := event("checkout.session.completed", stray)
	if _, err := c.ParseEvent(b, sign(b, secret, time.Now())); err == nil {
		t.Error("an event naming no payment was read")
	}
}

// TestCheckoutAndRefundOnStripeMock runs the API calls against stripe-mock, Stripe's API mock:
// every parameter the client sends must be one Stripe's API document accepts.
func TestCheckoutAndRefundOnStripeMock(t *testing.T) {
	testtier.NeedsServer(t, "stripe-mock")
	mock, err := servers.StartStripeMock(t.TempDir())
	if err != nil {
		t.Fatalf("stripe-mock: %v", err)
	}
	t.Cleanup(mock.Stop)
	c := stripepay.New("sk_test_123", mock.URL(), secret, nil)
	ctx := context.Background()
	url, id, err := c.Checkout(ctx, stripepay.Session{PaymentID: "pay_abc", OrderToken: "g_tok", Cents: 1999, Currency: "usd",
		Name: "Phone X", SuccessURL: "https://shop.example.com/activity/a1?paid=1", CancelURL: "https://shop.example.com/activity/a1"})
	if err != nil || url == "" || id == "" {
		t.Fatalf("checkout: %q %q, %v", url, id, err)
	}
	if _, err := c.Refund(ctx, "pi_123", "ref_1", 1999); err != nil {
		t.Fatalf("refund: %v", err)
	}
}

// TestSessionExpiry: a session expires with its order's window, kept within the 30 minutes to
// 24 hours Stripe takes.
func TestSessionExpiry(t *testing.T) {
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ window, want time.Duration }{
		{15 * time.Minute, 31 * time.Minute}, {2 * time.Hour, 2 * time.Hour}, {48 * time.Hour, 24*time.Hour - time.Minute},
	} {
		if got := stripepay.SessionExpiry(now.Add(tc.window), now); !got.Equal(now.Add(tc.want)) {
			t.Errorf("a window of %s: the session expires %s after, want %s", tc.window, got.Sub(now), tc.want)
		}
	}
}
