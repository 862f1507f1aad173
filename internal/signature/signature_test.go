package signature

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

var secret = []byte("a webhook secret of some length")

func TestSignAndVerify(t *testing.T) {
	now := time.Unix(1_900_000_000, 0)
	body := []byte(`{"id":"g1.paid"}`)
	sig := Sign(secret, now, body)
	if !strings.HasPrefix(sig, "t=1900000000,v1=") || len(sig) != len("t=1900000000,v1=")+64 {
		t.Fatalf("signature %q", sig)
	}
	if err := Verify(secret, sig, body, now.Add(4*time.Minute), Tolerance); err != nil {
		t.Fatalf("a good signature: %v", err)
	}
	other := Sign([]byte("another secret, being rotated in"), now, body)
	rotated := sig + "," + strings.Split(other, ",")[1]
	if err := Verify(secret, rotated, body, now, Tolerance); err != nil {
		t.Fatalf("two v1 values, one matching: %v", err)
	}
	for _, tc := range []struct {
		name   string
		header string
		body   string
		now    time.Time
		want   error
	}{
		{"a changed body", sig, `{"id":"g1.refunded"}`, now, ErrBadSignature},
		{"another secret", other, string(body), now, ErrBadSignature},
		{"a timestamp changed", strings.Replace(sig, "t=1900000000", "t=1900000001", 1), string(body), now, ErrBadSignature},
		{"too old", sig, string(body), now.Add(Tolerance + time.Second), ErrStale},
		{"from the future", sig, string(body), now.Add(-Tolerance - time.Second), ErrStale},
		{"no header", "", string(body), now, ErrNoSignature},
		{"no timestamp", strings.Split(sig, ",")[1], string(body), now, ErrNoSignature},
		{"no v1", "t=1900000000", string(body), now, ErrNoSignature},
		{"a v1 not hex", "t=1900000000,v1=zz", string(body), now, ErrNoSignature},
		{"a short v1", "t=1900000000,v1=abcd", string(body), now, ErrNoSignature},
	} {
		if err := Verify(secret, tc.header, []byte(tc.body), tc.now, Tolerance); !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
	}
}

// FuzzVerify holds Verify to accepting exactly what Sign produced. For any body signed at any
// time within the tolerance, Sign's header verifies; the same header over the body with any one
// byte changed is refused, and so is the header with any one of its bytes changed, but for a
// hex letter of v1 changed in case (the same MAC: Verify may take it or not). And an arbitrary header verifies only if one of its v1 values is the MAC of its own
// timestamp and the body: with a correct Verify this last check fails only on a forged HMAC,
// which is why the mutations above are the part that can catch a bug.
func FuzzVerify(f *testing.F) {
	now := time.Unix(1_900_000_000, 0)
	// The seeds change the header's last digit of t, bytes early and late in v1, and the case
	// of v1's letters; the body's first byte, and a byte in its middle.
	body := []byte(`{"order_token":"g1","amount_cents":999}`)
	f.Add(Sign(secret, now, []byte("{}")), []byte("{}"), int64(0), uint(11), byte(1))
	f.Add("t=1,v1=00", []byte(""), int64(-299), uint(17), byte(0x20))
	f.Add("", body, int64(299), uint(75), byte(1))
	f.Add("", body, int64(0), uint(len("t=1900000000,v1=")+50), byte(2))
	for i := range 64 {
		f.Add("", body, int64(-1), uint(len("t=1900000000,v1=")+i), byte(0x20))
	}
	f.Fuzz(func(t *testing.T, header string, body []byte, skew int64, pos uint, delta byte) {
		if err := Verify(secret, header, body, now, Tolerance); err == nil {
			var ts string
			for part := range strings.SplitSeq(header, ",") {
				if k, v, _ := strings.Cut(strings.TrimSpace(part), "="); k == "t" {
					ts = v
				}
			}
			if !strings.Contains(strings.ToLower(header), "v1="+hex.EncodeToString(mac(secret, ts, body))) {
				t.Fatalf("Verify passed %q for %q without its MAC", header, body)
			}
		}

		at := now.Add(time.Duration(skew%int64(Tolerance/time.Second)) * time.Second) // within the tolerance
		sig := Sign(secret, at, body)
		if err := Verify(secret, sig, body, now, Tolerance); err != nil {
			t.Fatalf("Sign's own header %q of %q, %ds from now: %v", sig, body, at.Unix()-now.Unix(), err)
		}
		if delta == 0 {
			delta = 1
		}
		if len(body) > 0 {
			changed := bytes.Clone(body)
			changed[int(pos%uint(len(body)))] ^= delta
			if err := Verify(secret, sig, changed, now, Tolerance); !errors.Is(err, ErrBadSignature) {
				t.Fatalf("%q signs %q; with %q it gave %v, want ErrBadSignature", sig, body, changed, err)
			}
		}
		i := int(pos % uint(len(sig)))
		b := []byte(sig)
		b[i] ^= delta
		err := Verify(secret, string(b), body, now, Tolerance)
		sameMAC := i >= strings.Index(sig, "v1=")+len("v1=") && sig[i] >= 'a' && sig[i] <= 'f' && b[i] == sig[i]-'a'+'A'
		if !sameMAC && err == nil {
			t.Fatalf("%q verified with byte %d changed (%q) over %q", b, i, sig, body)
		}
	})
}

// TestCheckoutSignature: a checkout URL's payment_id, order_token and amount_cents verify with
// the signature SignCheckout made, whatever else the shop's URL carries; a URL with any of them
// changed, repeated or missing, the signature missing, repeated or made with another secret is
// refused.
func TestCheckoutSignature(t *testing.T) {
	sig := SignCheckout(secret, "pay_1", "g1", 990)
	good := func() url.Values {
		return url.Values{"shop": {"s1"}, "payment_id": {"pay_1"}, "order_token": {"g1"}, "amount_cents": {"990"}, CheckoutParam: {sig}}
	}
	if err := VerifyCheckout(secret, good()); err != nil {
		t.Fatalf("the signed URL: %v", err)
	}
	q := good()
	q.Set("shop", "another shop parameter")
	if err := VerifyCheckout(secret, q); err != nil {
		t.Fatalf("the shop's own parameter changed: %v", err)
	}
	for name, edit := range map[string]func(q url.Values){
		"the amount edited":   func(q url.Values) { q.Set("amount_cents", "1090") },
		"the amount repeated": func(q url.Values) { q.Add("amount_cents", "1090") },
		"the amount removed":  func(q url.Values) { q.Del("amount_cents") },
		"another order":       func(q url.Values) { q.Set("order_token", "g2") },
		"another payment":     func(q url.Values) { q.Set("payment_id", "pay_2") },
		"no signature":        func(q url.Values) { q.Del(CheckoutParam) },
		"two signatures":      func(q url.Values) { q.Add(CheckoutParam, sig) },
		"a signature not hex": func(q url.Values) { q.Set(CheckoutParam, "zz") },
		"another secret's":    func(q url.Values) { q.Set(CheckoutParam, SignCheckout([]byte("another secret"), "pay_1", "g1", 990)) },
		"the callback scheme's": func(q url.Values) {
			q.Set(CheckoutParam, strings.TrimPrefix(Sign(secret, time.Unix(0, 0), []byte(q.Encode())), "t=0,v1="))
		},
		"the amount moved to the order": func(q url.Values) { q.Set("order_token", "g1&amount_cents=990"); q.Del("amount_cents") },
	} {
		q := good()
		edit(q)
		if err := VerifyCheckout(secret, q); !errors.Is(err, ErrBadCheckout) {
			t.Errorf("%s: %v, want ErrBadCheckout", name, err)
		}
	}
}
