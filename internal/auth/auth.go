// Package auth mints and verifies the users' bearer tokens: JWTs signed with HS256, whose subject
// is the user id. The algorithm is pinned (alg "none" and every other algorithm are refused) and
// an expiry is required.
package auth

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"seckill/internal/sale"
)

// MinSecretLen is the shortest HS256 secret accepted: 32 bytes, the size of the hash.
const MinSecretLen = 32

// MaxUserLen bounds a user id (the JWT subject).
const MaxUserLen = sale.MaxUserIDLen

// Tokens mints and verifies user tokens with one secret.
type Tokens struct {
	secret []byte
	parser *jwt.Parser
	now    func() time.Time
	recent recent
}

// New returns Tokens for secret, which must be at least MinSecretLen bytes. now is the clock
// tokens are checked against (time.Now outside tests): the service's own, so that a test that
// pins the service's clock verifies on it too.
func New(secret []byte, now func() time.Time) (*Tokens, error) {
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("%w: the JWT secret must be at least %d bytes", sale.ErrInvalid, MinSecretLen)
	}
	t := &Tokens{secret: append([]byte(nil), secret...), now: now}
	t.parser = jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(leeway),
		jwt.WithTimeFunc(func() time.Time { return t.now() }),
	)
	t.recent.init()
	return t, nil
}

// leeway is the clock skew allowed between the token's issuer and this node.
const leeway = 5 * time.Second

// Mint returns a token for user valid until now+ttl.
func (t *Tokens) Mint(user string, now time.Time, ttl time.Duration) (string, error) {
	if !ValidUser(user) {
		return "", fmt.Errorf("%w: user id must be 1-%d printable ASCII characters", sale.ErrInvalid, MaxUserLen)
	}
	claims := jwt.RegisteredClaims{
		Subject:   user,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(t.secret)
}

// Verify returns the user id of a valid, unexpired token. Errors: sale.ErrUnauthorized.
//
// A token verified lately is answered from memory until its expiry: a client repeating its token
// (a user polling an order, a bot hammering the grab) costs a map lookup, not an HMAC and a JSON
// decode. Only tokens that passed every check are remembered, so nothing else changes.
func (t *Tokens) Verify(token string) (string, error) {
	now := t.now()
	if user, ok := t.recent.get(token, now); ok {
		return user, nil
	}
	var claims jwt.RegisteredClaims
	_, err := t.parser.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return t.secret, nil })
	if err != nil {
		return "", fmt.Errorf("%w: %v", sale.ErrUnauthorized, reason(err))
	}
	if !ValidUser(claims.Subject) {
		return "", fmt.Errorf("%w: the token's subject is not a valid user id", sale.ErrUnauthorized)
	}
	t.recent.put(token, claims.Subject, claims.ExpiresAt.Time)
	return claims.Subject, nil
}

// recent remembers verified tokens until their expiry, in shards of at most shardCap entries; a
// full shard is emptied, which bounds memory whatever the crowd sends.
type recent struct {
	seed   maphash.Seed
	shards [16]struct {
		mu sync.Mutex
		m  map[string]remembered
	}
}

type remembered struct {
	user string
	exp  time.Time
}

const shardCap = 8192

func (r *recent) init() {
	r.seed = maphash.MakeSeed()
	for i := range r.shards {
		r.shards[i].m = map[string]remembered{}
	}
}

func (r *recent) shard(token string) int {
	return int(maphash.String(r.seed, token) % uint64(len(r.shards)))
}

func (r *recent) get(token string, now time.Time) (string, bool) {
	sh := &r.shards[r.shard(token)]
	sh.mu.Lock()
	e, ok := sh.m[token]
	sh.mu.Unlock()
	if !ok || !now.Before(e.exp) {
		return "", false // the parser decides, with its leeway, and says why
	}
	return e.user, true
}

func (r *recent) put(token, user string, exp time.Time) {
	sh := &r.shards[r.shard(token)]
	sh.mu.Lock()
	if len(sh.m) >= shardCap {
		clear(sh.m)
	}
	sh.m[token] = remembered{user: user, exp: exp}
	sh.mu.Unlock()
}

// reason turns the library's error into a short message that reveals nothing about the secret.
func reason(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return "the token has expired"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "the token has no expiry"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return "the token's signature or algorithm is not accepted"
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "the token is not valid yet"
	default:
		return "the token is malformed"
	}
}

// ValidUser reports whether s can be a user id: 1 to MaxUserLen printable ASCII characters.
func ValidUser(s string) bool { return sale.ValidUserID(s) }

// Equal compares a presented secret with the expected one in time independent of where they
// differ (the admin token check).
func Equal(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}
