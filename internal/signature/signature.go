// Package signature is the scheme that signs the webhooks seckill sends and the payment
// callbacks it takes:
//
//	Seckill-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
//
// A receiver recomputes the HMAC over the timestamp, a dot and the raw body, compares it in
// constant time and refuses a timestamp too far from its clock, so that a body seen once cannot
// be sent again later.
//
// It also signs what a checkout URL tells the payment provider (SignCheckout), so that a buyer
// who edits the amount in the URL is refused at the provider's page.
package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Header is the header that carries a body's signature.
const Header = "Seckill-Signature"

// Tolerance is how far a signature's timestamp may be from the receiver's clock.
const Tolerance = 5 * time.Minute

// The reasons Verify refuses a body.
var (
	ErrNoSignature  = errors.New("no Seckill-Signature header, or not t=...,v1=...")
	ErrBadSignature = errors.New("the signature does not match the body")
	ErrStale        = errors.New("the signature's timestamp is too far from now")
)

// Sign returns the Seckill-Signature value of body, signed with secret at t.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks that header (a Seckill-Signature value) signs body with secret, at a time within
// tolerance of now. A header may carry several v1 values (a secret being rotated): one match is
// enough. Errors: ErrNoSignature, ErrBadSignature, ErrStale.
func Verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case !ok:
		case k == "t":
			ts = v
		case k == "v1":
			if b, err := hex.DecodeString(v); err == nil && len(b) == sha256.Size {
				sigs = append(sigs, b)
			}
		}
	}
	at, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrNoSignature
	}
	want := mac(secret, ts, body)
	matched := false
	for _, s := range sigs {
		matched = hmac.Equal(s, want) || matched
	}
	if !matched {
		return ErrBadSignature
	}
	if d := now.Sub(time.Unix(at, 0)); d > tolerance || d < -tolerance {
		return ErrStale
	}
	return nil
}

// CheckoutParam is the query parameter of a checkout URL that carries its signature.
const CheckoutParam = "sig"

// checkoutParams are the parameters of a checkout URL that its signature covers.
var checkoutParams = []string{"amount_cents", "order_token", "payment_id"}

// ErrBadCheckout says a checkout URL's parameters are not as the shop signed them.
var ErrBadCheckout = errors.New("the checkout URL's payment_id, order_token and amount_cents are not as the shop signed them")

// SignCheckout returns the signature of a checkout URL's payment_id, order_token and
// amount_cents (the value of its CheckoutParam):
//
//	hex HMAC-SHA256(secret, "checkout." + "amount_cents=<a>&order_token=<o>&payment_id=<p>")
//
// the three form-encoded in that order (url.Values.Encode). The "checkout." prefix keeps it from
// ever reading as a callback's or a webhook's signature.
func SignCheckout(secret []byte, paymentID, orderToken string, amountCents int64) string {
	q := url.Values{"payment_id": {paymentID}, "order_token": {orderToken}, "amount_cents": {strconv.FormatInt(amountCents, 10)}}
	return hex.EncodeToString(checkoutMAC(secret, q))
}

func checkoutMAC(secret []byte, q url.Values) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("checkout."))
	h.Write([]byte(q.Encode()))
	return h.Sum(nil)
}

// VerifyCheckout checks that query (a checkout URL's) carries each of payment_id, order_token
// and amount_cents once, and CheckoutParam once, their signature with secret: what a provider's
// page does before it takes any money. Other parameters (the shop's own) are not covered.
// Errors: ErrBadCheckout.
func VerifyCheckout(secret []byte, query url.Values) error {
	signed := url.Values{}
	for _, k := range checkoutParams {
		if len(query[k]) != 1 {
			return ErrBadCheckout
		}
		signed[k] = query[k]
	}
	sig, err := hex.DecodeString(query.Get(CheckoutParam))
	if err != nil || len(query[CheckoutParam]) != 1 || !hmac.Equal(sig, checkoutMAC(secret, signed)) {
		return ErrBadCheckout
	}
	return nil
}
