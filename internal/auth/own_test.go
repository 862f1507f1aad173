package auth

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"seckill/internal/sale"
	"seckill/internal/saletest"
)

// FuzzOwnAgreesWithParser: for any payload under Mint's header, signed with the secret or not,
// own.verify and the library's parser agree: both accept with the same claims, or both refuse
// for the same reason. The seeds are Mint's shape and its near misses, which own reads itself or
// must hand to encoding/json.
func FuzzOwnAgreesWithParser(f *testing.F) {
	now := saletest.T0
	tk := newTokens(f)
	tk.now = func() time.Time { return now }
	exp, iat := now.Add(time.Hour).Unix(), now.Unix()
	for _, p := range []string{
		fmt.Sprintf(`{"sub":"alice","exp":%d,"iat":%d}`, exp, iat),
		fmt.Sprintf(`{"sub":"alice","exp":%d,"iat":%d}`, iat-60, iat-3600),    // expired
		fmt.Sprintf(`{"sub":"alice","exp":%d,"iat":%d}`, iat-2, iat-3600),     // expired, within the leeway
		fmt.Sprintf(`{"sub":"alice","exp":%d,"iat":%d}`, exp, iat+3600),       // issued in the future
		fmt.Sprintf(`{"sub":"al\u0069ce","exp":%d,"iat":%d}`, exp, iat),       // an escape
		fmt.Sprintf(`{"sub":"al\"ce","exp":%d,"iat":%d}`, exp, iat),           // a quote
		fmt.Sprintf(`{"sub":"ålice","exp":%d,"iat":%d}`, exp, iat),            // not ASCII
		fmt.Sprintf(`{"sub":"alice","exp":%d.5,"iat":%d}`, exp, iat),          // a fraction
		fmt.Sprintf(`{"sub":"alice","exp":0%d,"iat":%d}`, exp, iat),           // a leading zero
		fmt.Sprintf(`{"sub":"alice","exp":%d,"iat":%d}`, int64(1)<<53+1, iat), // past float64's integers
		fmt.Sprintf(`{"sub":"alice","exp":%de0,"iat":%d}`, exp, iat),
		fmt.Sprintf(`{"sub":"alice","exp":%d,"iat":%d,"nbf":%d}`, exp, iat, exp-1), // not yet valid
		fmt.Sprintf(`{"sub":"alice","exp":%d,"iat":%d} `, exp, iat),
		fmt.Sprintf(`{"sub":"alice","exp":%d,"iat":%d}}`, exp, iat),
		fmt.Sprintf(`{"sub":"alice","iat":%d}`, iat), // no expiry
		fmt.Sprintf(`{"exp":%d,"sub":"alice","aud":["x"]}`, exp),
		fmt.Sprintf(`{"sub":"","exp":%d,"iat":%d}`, exp, iat),
		fmt.Sprintf(`{"sub":"alice","exp":"%d","iat":%d}`, exp, iat),
		`{"sub":"alice","exp":,"iat":1}`, `{"sub":"alice`, `{}`, `null`, `[]`, ``,
	} {
		f.Add(p, true, "")
		f.Add(p, false, "")
		f.Add(p, true, ".x")
	}
	head := tk.own.header
	f.Fuzz(func(t *testing.T, payload string, signed bool, tail string) {
		text := head + "." + base64.RawURLEncoding.EncodeToString([]byte(payload))
		sig, err := jwt.SigningMethodHS256.Sign(text, secret)
		if err != nil {
			t.Fatal(err)
		}
		if !signed {
			sig[0] ^= 1
		}
		token := text + "." + base64.RawURLEncoding.EncodeToString(sig) + tail
		got, mine, gotErr := tk.own.verify(token)
		if !mine {
			t.Fatalf("%q: Mint's header not recognised", token)
		}
		want, wantErr := tk.parse(token)
		if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && reason(gotErr) != reason(wantErr)) {
			t.Fatalf("payload %q signed %v tail %q: own says %v, the parser %v", payload, signed, tail, gotErr, wantErr)
		}
		if gotErr == nil && !sameClaims(got, want) {
			t.Fatalf("payload %q: own read %+v, the parser %+v", payload, got, want)
		}
	})
}

func sameClaims(a, b jwt.RegisteredClaims) bool {
	date := func(d *jwt.NumericDate) string {
		if d == nil {
			return "nil"
		}
		return d.UTC().Format(time.RFC3339Nano)
	}
	return a.Issuer == b.Issuer && a.Subject == b.Subject && a.ID == b.ID &&
		strings.Join(a.Audience, "\x00") == strings.Join(b.Audience, "\x00") && len(a.Audience) == len(b.Audience) &&
		date(a.ExpiresAt) == date(b.ExpiresAt) && date(a.NotBefore) == date(b.NotBefore) && date(a.IssuedAt) == date(b.IssuedAt)
}

// TestOwnReadsMintsShapeItself: the tokens Mint makes are read by own's own reader, not handed
// to encoding/json (what makes it cheaper), and a token of another header is left to the parser.
func TestOwnReadsMintsShapeItself(t *testing.T) {
	tk := newTokens(t)
	tok, err := tk.Mint("alice", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	_, payload, _ := strings.Cut(tok, ".")
	payload, _, _ = strings.Cut(payload, ".")
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		t.Fatal(err)
	}
	var c jwt.RegisteredClaims
	if !parseMinted(raw, &c) || c.Subject != "alice" {
		t.Fatalf("Mint's payload %s not read by parseMinted: %+v", raw, c)
	}
	other := sign(t, jwt.SigningMethodHS384, secret, jwt.RegisteredClaims{Subject: "alice",
		ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))})
	if _, mine, _ := tk.own.verify(other); mine {
		t.Fatal("an HS384 token was taken for one of Mint's")
	}
	if _, err := tk.Verify(other); !errors.Is(err, sale.ErrUnauthorized) {
		t.Fatalf("an HS384 token: %v, want it refused", err)
	}
}
