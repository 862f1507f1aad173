// Package auth mints and verifies the users' bearer tokens: the node's own JWTs signed with
// HS256, whose subject is the user id, and, when an identity provider is configured, the
// provider's RS256, ES256 and EdDSA tokens (provider.go). Algorithms are pinned (alg "none" and
// every algorithm not named are refused, and a provider's algorithm to its key's type) and an
// expiry is required.
package auth

import (
	"context"
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

// Tokens mints and verifies user tokens with one secret, and verifies an identity provider's.
type Tokens struct {
	secret []byte
	parser *jwt.Parser
	own    *own // the node's own tokens, verified without the parser's general decoding
	idp    *idp // nil: the node's own tokens only
	now    func() time.Time
	recent recent
}

// Config is what Tokens verify with.
type Config struct {
	Secret   []byte           // the node's HS256 secret, at least MinSecretLen bytes
	Now      func() time.Time // the clock tokens are checked against; nil: time.Now
	Provider *Provider        // nil: no identity provider
}

// New returns Tokens for secret alone (see Open).
func New(secret []byte, now func() time.Time) (*Tokens, error) {
	return Open(context.Background(), Config{Secret: secret, Now: now})
}

// Open returns Tokens for c, reading the provider's key set first: ctx ends its refreshes. The
// clock is the service's own, so that a test that pins the service's clock verifies on it too.
// Errors: sale.ErrInvalid (a short secret), sale.ErrBusy (the provider's keys cannot be read).
func Open(ctx context.Context, c Config) (*Tokens, error) {
	if len(c.Secret) < MinSecretLen {
		return nil, fmt.Errorf("%w: the JWT secret must be at least %d bytes", sale.ErrInvalid, MinSecretLen)
	}
	now := c.Now
	if now == nil {
		now = time.Now
	}
	t := &Tokens{secret: append([]byte(nil), c.Secret...), now: now}
	if c.Provider != nil {
		p, err := openProvider(ctx, *c.Provider, func() time.Time { return t.now() })
		if err != nil {
			return nil, err
		}
		t.idp = p
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(leeway),
		jwt.WithTimeFunc(func() time.Time { return t.now() }),
	}
	t.parser = jwt.NewParser(opts...)
	t.own = newOwn(t.secret, opts...)
	t.recent.init()
	return t, nil
}

// leeway is the clock skew allowed between the token's issuer and this node.
const leeway = 5 * time.Second

// Mint returns a token for user valid until now+ttl.
func (t *Tokens) Mint(user string, now time.Time, ttl time.Duration) (string, error) {
	if !ValidUser(user) {
		return "", sale.BadUserID("user id")
	}
	claims := jwt.RegisteredClaims{
		Subject:   user,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(t.secret)
}

// Identity is what a valid token says of its holder: the user and, when the identity provider's
// token carries the claims Provider names, the account's creation and its trust level (risk
// features; a hint the provider gives, which nothing else depends on).
type Identity struct {
	User     string
	Created  time.Time // zero: not said
	Trust    float64
	HasTrust bool
}

// Verify returns the user id of a valid, unexpired token. Errors: sale.ErrUnauthorized.
//
// A token verified lately is answered from memory until its expiry: a client repeating its token
// (a user polling an order, a bot hammering the grab) costs a map lookup, not an HMAC and a JSON
// decode. Only tokens that passed every check are remembered, so nothing else changes.
func (t *Tokens) Verify(token string) (string, error) {
	id, err := t.Identify(token)
	return id.User, err
}

// Identify is Verify with what else the token says of its holder.
func (t *Tokens) Identify(token string) (Identity, error) {
	now := t.now()
	if id, ok := t.recent.get(token, now); ok {
		return id, nil
	}
	id, exp, err := t.verify(token)
	if err != nil {
		return Identity{}, err
	}
	t.recent.put(token, id, exp)
	return id, nil
}

// verify checks token with the verifier its header names: the node's secret for HS256 (and
// whatever cannot be read), the identity provider's keys for the rest.
func (t *Tokens) verify(token string) (Identity, time.Time, error) {
	claims, mine, err := t.own.verify(token)
	if !mine {
		if t.idp != nil && headerAlg(token) != jwt.SigningMethodHS256.Alg() {
			return t.idp.verify(token)
		}
		claims, err = t.parse(token)
	}
	if err != nil {
		return Identity{}, time.Time{}, fmt.Errorf("%w: %v", sale.ErrUnauthorized, reason(err))
	}
	if !ValidUser(claims.Subject) {
		return Identity{}, time.Time{}, fmt.Errorf("%w: the token's subject is not a valid user id", sale.ErrUnauthorized)
	}
	return Identity{User: claims.Subject}, claims.ExpiresAt.Time, nil
}

// parse verifies an HS256 token with the library's parser.
func (t *Tokens) parse(token string) (jwt.RegisteredClaims, error) {
	var claims jwt.RegisteredClaims
	_, err := t.parser.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return t.secret, nil })
	return claims, err
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
	id  Identity
	exp time.Time
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

func (r *recent) get(token string, now time.Time) (Identity, bool) {
	sh := &r.shards[r.shard(token)]
	sh.mu.Lock()
	e, ok := sh.m[token]
	sh.mu.Unlock()
	if !ok || !now.Before(e.exp) {
		return Identity{}, false // the parser decides, with its leeway, and says why
	}
	return e.id, true
}

func (r *recent) put(token string, id Identity, exp time.Time) {
	sh := &r.shards[r.shard(token)]
	sh.mu.Lock()
	if len(sh.m) >= shardCap {
		clear(sh.m)
	}
	sh.m[token] = remembered{id: id, exp: exp}
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
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "the token's issuer is not trusted"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "the token is not for this service (audience)"
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
