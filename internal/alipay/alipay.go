// Package alipay speaks Alipay's open API (支付宝开放平台) for seckill's payments: the signed
// redirect that starts a payment (alipay.trade.wap.pay on a phone, alipay.trade.page.pay on a
// desktop), the check of its asynchronous notice, and the refund call (alipay.trade.refund).
//
// Every signature is RSA2: SHA256withRSA (RSASSA-PKCS1-v1_5) over the parameters that have a
// value, sign left out, sorted by name and joined as k=v&… with the values as they are (not
// escaped); base64 in the sign parameter. What the node sends is signed with the app's private
// key, what it receives is checked with Alipay's public key, and a notice is checked before
// anything in it is read. Amounts travel in yuan with two decimals ("9.90"); the node counts in
// fen (cents), and converts exactly (Cents, Yuan).
package alipay

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"seckill/internal/rsasig"
)

// DefaultGateway is Alipay's production gateway.
const DefaultGateway = "https://openapi.alipay.com/gateway.do"

// timeLayout is Alipay's "yyyy-MM-dd HH:mm:ss".
const timeLayout = "2006-01-02 15:04:05"

// ErrSignature says a signature is missing, malformed or does not match: the message was forged
// or altered, or signed with a key other than the one configured.
var ErrSignature = errors.New("alipay: the signature does not verify")

// Content is what a signature covers: the parameters of p that have a value, less sign and the
// names in skip, sorted by name, as k=v joined by &, the values unescaped.
func Content(p url.Values, skip ...string) string {
	keys := make([]string, 0, len(p))
	for k, v := range p {
		if k == "sign" || slices.Contains(skip, k) || len(v) == 0 || v[0] == "" {
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(p.Get(k))
	}
	return b.String()
}

// Sign is the RSA2 signature of content with key, base64.
func Sign(key *rsa.PrivateKey, content string) (string, error) {
	sig, err := rsasig.Sign(key, content)
	if err != nil {
		return "", fmt.Errorf("alipay: %w", err)
	}
	return sig, nil
}

// Verify checks sig, an RSA2 signature in base64, of content with key. Errors: ErrSignature.
func Verify(key *rsa.PublicKey, content, sig string) error {
	if !rsasig.Verify(key, content, sig) {
		return ErrSignature
	}
	return nil
}

// MaxCents bounds an amount Alipay takes in one trade: 100,000,000.00 yuan.
const MaxCents = 100_000_000_00

// Cents reads an amount in yuan as Alipay writes it: digits, a point and exactly two decimals
// ("9.90", "0.01", "120.00"), without sign, spaces, exponent or leading zeros. Anything else is
// refused rather than rounded: a notice whose amount cannot be read exactly is not applied.
func Cents(yuan string) (int64, error) {
	whole, frac, ok := strings.Cut(yuan, ".")
	bad := !ok || len(frac) != 2 || whole == "" || len(whole) > 1 && whole[0] == '0' || len(whole) > 9
	for _, c := range whole + frac {
		bad = bad || c < '0' || c > '9'
	}
	if bad {
		return 0, fmt.Errorf("alipay: amount %q is not yuan with two decimals", yuan)
	}
	w, _ := strconv.ParseInt(whole, 10, 64)
	f, _ := strconv.ParseInt(frac, 10, 64)
	c := w*100 + f
	if c > MaxCents {
		return 0, fmt.Errorf("alipay: amount %q is over the most one trade takes", yuan)
	}
	return c, nil
}

// Yuan writes cents as Alipay reads an amount: "9.90".
func Yuan(cents int64) string {
	return fmt.Sprintf("%d.%02d", cents/100, cents%100)
}

// ParsePrivateKey reads the app's RSA private key: PEM, PKCS #8 or PKCS #1.
func ParsePrivateKey(data []byte) (*rsa.PrivateKey, error) {
	k, err := rsasig.ParsePrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("alipay: %w", err)
	}
	return k, nil
}

// ParsePublicKey reads Alipay's RSA public key: PEM, PKIX ("PUBLIC KEY") or PKCS #1.
func ParsePublicKey(data []byte) (*rsa.PublicKey, error) {
	k, err := rsasig.ParsePublicKey(data)
	if err != nil {
		return nil, fmt.Errorf("alipay: %w", err)
	}
	return k, nil
}
