package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// own verifies the tokens this node mints (Mint's header, exactly) with the library's own checks
// but not its general parser: that parser decodes every header into a map and every payload by
// reflection through an interface, and builds its HMAC's key schedule again for each token:
// 6.7 µs and 46 allocations a token, against 1.1 µs and 7 here (docs/BENCHMARKS.md §12). Any
// other token, valid or not, goes to the library's parser: own only says "not mine".
//
// What it checks is what the parser checks for such a token: three segments of unpadded
// base64url, the HS256 signature over the first two, and the claims by the library's Validator
// built from the same options. Where they could differ on the claims' JSON (escapes, numbers,
// other claims), the payload is decoded by encoding/json as the parser does; only the payload
// Mint writes, byte for byte in its shape, is read without it.
type own struct {
	header    string // Mint's first segment
	validator *jwt.Validator
	macs      sync.Pool // *mac
}

// mac is an HMAC-SHA256 keyed with the secret, and a buffer for the text it signs.
type mac struct {
	hash.Hash
	text []byte
}

func newOwn(secret []byte, opts ...jwt.ParserOption) *own {
	o := &own{validator: jwt.NewValidator(opts...)}
	o.macs.New = func() any { return &mac{Hash: hmac.New(sha256.New, secret)} }
	// The header is the library's, as Mint signs it: learnt from a token, not written down here.
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{}).SignedString(secret)
	if err != nil {
		panic(err) // HS256 with a []byte key does not fail
	}
	o.header, _, _ = strings.Cut(tok, ".")
	return o
}

// verify returns the claims of token when it carries Mint's header (mine true), with the error
// the parser would give it, wrapping the same sentinels (which reason reads); mine false: not one of ours, let the
// parser decide.
func (o *own) verify(token string) (claims jwt.RegisteredClaims, mine bool, err error) {
	head, rest, _ := strings.Cut(token, ".")
	if head != o.header {
		return claims, false, nil
	}
	payload, sig, ok := strings.Cut(rest, ".")
	if !ok || strings.IndexByte(sig, '.') >= 0 {
		return claims, true, jwt.ErrTokenMalformed
	}
	var buf [512]byte
	raw, err := decodeSegment(buf[:0], payload)
	if err != nil {
		return claims, true, jwt.ErrTokenMalformed
	}
	if !parseMinted(raw, &claims) {
		claims = jwt.RegisteredClaims{}
		if json.Unmarshal(raw, &claims) != nil {
			return claims, true, jwt.ErrTokenMalformed
		}
	}
	var sb [sha256.Size]byte
	got, err := decodeSegment(sb[:0], sig)
	if err != nil {
		return claims, true, jwt.ErrTokenMalformed
	}
	m := o.macs.Get().(*mac)
	m.Reset()
	m.text = append(m.text[:0], token[:len(head)+1+len(payload)]...)
	m.Write(m.text)
	var want [sha256.Size]byte
	good := hmac.Equal(got, m.Sum(want[:0]))
	o.macs.Put(m)
	if !good {
		return claims, true, jwt.ErrTokenSignatureInvalid
	}
	if err := o.validator.Validate(&claims); err != nil {
		return claims, true, fmt.Errorf("%w: %w", jwt.ErrTokenInvalidClaims, err)
	}
	return claims, true, nil
}

// decodeSegment decodes s, unpadded base64url as the parser reads it by default, into dst when
// it fits.
func decodeSegment(dst []byte, s string) ([]byte, error) {
	enc := base64.RawURLEncoding
	if n := enc.DecodedLen(len(s)); n > cap(dst) {
		dst = make([]byte, 0, n)
	}
	return enc.AppendDecode(dst, []byte(s))
}

// parseMinted reads the payload Mint writes, {"sub":"…","exp":N,"iat":N}, into c, and reports
// whether raw was exactly that: a subject of printable ASCII without escapes, and times of
// whole seconds written as JSON writes them. On anything else it says false, and encoding/json
// decides.
func parseMinted(raw []byte, c *jwt.RegisteredClaims) bool {
	s := string(raw) // the one copy: the subject is a part of it
	var ok bool
	if s, ok = strings.CutPrefix(s, `{"sub":"`); !ok {
		return false
	}
	end := strings.IndexByte(s, '"')
	if end < 0 {
		return false
	}
	for i := range end {
		if s[i] < 0x20 || s[i] > 0x7e || s[i] == '\\' {
			return false
		}
	}
	sub := s[:end]
	s = s[end+1:]
	var exp, iat int64
	if s, ok = strings.CutPrefix(s, `,"exp":`); !ok {
		return false
	}
	if exp, s, ok = seconds(s); !ok {
		return false
	}
	if s, ok = strings.CutPrefix(s, `,"iat":`); !ok {
		return false
	}
	if iat, s, ok = seconds(s); !ok || s != "}" {
		return false
	}
	c.Subject = sub
	c.ExpiresAt = jwt.NewNumericDate(time.Unix(exp, 0))
	c.IssuedAt = jwt.NewNumericDate(time.Unix(iat, 0))
	return true
}

// seconds reads a JSON integer of at most 15 digits (exact as the float64 the library reads
// NumericDate through) from the start of s.
func seconds(s string) (n int64, rest string, ok bool) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		n = n*10 + int64(s[i]-'0')
		i++
	}
	if i == 0 || i > 15 || (s[0] == '0' && i > 1) {
		return 0, s, false
	}
	return n, s[i:], true
}
