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
// 6.7 µs and 46 allocations a token, against 1.3 µs and 5 here (docs/BENCHMARKS.md §12). Any
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
	scratch   sync.Pool // *scratch
}

// scratch is an HMAC-SHA256 keyed with the secret, and the buffers a token is read into: a
// token's bytes would otherwise be copied to the heap for each of base64 and the hash.
type scratch struct {
	mac  hash.Hash
	text []byte // the signed text: the header, a dot and the payload, as sent
	raw  []byte // the payload, decoded
	sent []byte // the signature, as sent
	sig  []byte // the signature, decoded
	sum  [sha256.Size]byte
}

func newOwn(secret []byte, opts ...jwt.ParserOption) *own {
	o := &own{validator: jwt.NewValidator(opts...)}
	o.scratch.New = func() any { return &scratch{mac: hmac.New(sha256.New, secret)} }
	// The header is the library's, as Mint signs it: learnt from a token, not written down here.
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{}).SignedString(secret)
	if err != nil {
		panic(err) // HS256 with a []byte key does not fail
	}
	o.header, _, _ = strings.Cut(tok, ".")
	return o
}

// verify returns the claims of token when it carries Mint's header (mine true), with the error
// the parser would give it, wrapping the same sentinels (which reason reads); mine false: not
// one of ours, let the parser decide.
func (o *own) verify(token string) (claims jwt.RegisteredClaims, mine bool, err error) {
	head, rest, _ := strings.Cut(token, ".")
	if head != o.header {
		return claims, false, nil
	}
	payload, sig, ok := strings.Cut(rest, ".")
	if !ok || strings.IndexByte(sig, '.') >= 0 {
		return claims, true, jwt.ErrTokenMalformed
	}
	sc := o.scratch.Get().(*scratch)
	defer o.put(sc)
	sc.text = append(sc.text[:0], token[:len(head)+1+len(payload)]...)
	enc := base64.RawURLEncoding // the parser's default
	if sc.raw, err = enc.AppendDecode(sc.raw[:0], sc.text[len(head)+1:]); err != nil {
		return claims, true, jwt.ErrTokenMalformed
	}
	if !parseMinted(sc.raw, &claims) {
		claims = jwt.RegisteredClaims{}
		if json.Unmarshal(sc.raw, &claims) != nil {
			return claims, true, jwt.ErrTokenMalformed
		}
	}
	sc.sent = append(sc.sent[:0], sig...)
	if sc.sig, err = enc.AppendDecode(sc.sig[:0], sc.sent); err != nil {
		return claims, true, jwt.ErrTokenMalformed
	}
	sc.mac.Reset()
	sc.mac.Write(sc.text)
	if !hmac.Equal(sc.sig, sc.mac.Sum(sc.sum[:0])) {
		return claims, true, jwt.ErrTokenSignatureInvalid
	}
	if err := o.validator.Validate(&claims); err != nil {
		return claims, true, fmt.Errorf("%w: %w", jwt.ErrTokenInvalidClaims, err)
	}
	return claims, true, nil
}

// put returns sc to the pool unless a long token grew its buffers: one such token must not
// keep its size alive in every processor's pool.
func (o *own) put(sc *scratch) {
	if cap(sc.text)+cap(sc.raw)+cap(sc.sent)+cap(sc.sig) <= maxScratch {
		o.scratch.Put(sc)
	}
}

// maxScratch bounds the buffers a pooled scratch keeps: a minted token is about 150 bytes.
const maxScratch = 8 << 10

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
