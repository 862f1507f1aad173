package signature

import (
	"errors"
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

func FuzzVerify(f *testing.F) {
	now := time.Unix(1_900_000_000, 0)
	f.Add(Sign(secret, now, []byte("{}")), []byte("{}"))
	f.Add("t=1,v1=00", []byte(""))
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		err := Verify(secret, header, body, now, Tolerance)
		if err == nil && Sign(secret, now, body) != header && !strings.Contains(header, strings.Split(Sign(secret, now, body), ",")[1]) {
			// A header this package did not sign passed only if it carries the right MAC.
			t.Fatalf("Verify passed %q for %q", header, body)
		}
	})
}
