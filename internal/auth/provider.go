package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"

	"seckill/internal/sale"
)

// Provider is an identity provider whose tokens a node accepts besides its own HS256 ones:
// RS256, ES256 and EdDSA tokens signed by a key of the JWK Set published at JWKSURL.
type Provider struct {
	JWKSURL   string
	Issuer    string // the tokens' "iss", checked when set
	Audience  string // one of the tokens' "aud", checked when set
	UserClaim string // the claim that names the user; empty: "sub"
	// CreatedClaim and TrustClaim name the claims that say when the account was created (a
	// NumericDate, or an RFC 3339 string) and how far the provider trusts it (a number): risk
	// features, when set and carried. A claim of another type is ignored.
	CreatedClaim, TrustClaim string
	Client                   *http.Client // nil: the default client
	Log                      *slog.Logger // told of failed refreshes; nil: slog.Default()
}

// The provider's key set is fetched when the node starts (a node that cannot read it does not
// start), refreshed every jwksRefresh, and fetched again when a token names a key the set does
// not hold (a key rotated in), at most once every unknownKIDEvery: a flood of made-up key ids
// costs one fetch per period, and the tokens that find no key meanwhile are refused at once.
// Every fetch has jwksTimeout.
const (
	jwksRefresh     = 15 * time.Minute
	unknownKIDEvery = 10 * time.Second
	jwksTimeout     = 5 * time.Second
)

// pinned says, for each algorithm a provider's token may use, which keys may verify it: the
// algorithm is pinned to its key's type, whatever the token's header claims.
var pinned = map[string]func(key any) bool{
	jwt.SigningMethodRS256.Alg(): func(k any) bool { _, ok := k.(*rsa.PublicKey); return ok },
	jwt.SigningMethodES256.Alg(): func(k any) bool {
		pk, ok := k.(*ecdsa.PublicKey)
		return ok && pk.Curve == elliptic.P256()
	},
	jwt.SigningMethodEdDSA.Alg(): func(k any) bool { _, ok := k.(ed25519.PublicKey); return ok },
}

// idp verifies a provider's tokens.
type idp struct {
	keys    jwkset.Storage // the set as last fetched; reading it fetches nothing
	jwks    keyfunc.Keyfunc
	unknown *rate.Limiter // the refetches for a key the set does not hold
	parser  *jwt.Parser
	claim   string
	created string // "": not read
	trust   string
}

func openProvider(ctx context.Context, p Provider, now func() time.Time) (*idp, error) {
	if p.JWKSURL == "" {
		return nil, fmt.Errorf("%w: an identity provider needs its JWK Set URL", sale.ErrInvalid)
	}
	log := p.Log
	if log == nil {
		log = slog.Default()
	}
	keys, err := jwkset.NewStorageFromHTTP(p.JWKSURL, jwkset.HTTPClientStorageOptions{
		Client:          p.Client,
		Ctx:             ctx,
		HTTPTimeout:     jwksTimeout,
		RefreshInterval: jwksRefresh,
		RefreshErrorHandler: func(ctx context.Context, err error) {
			log.WarnContext(ctx, "refresh the identity provider's keys", "url", p.JWKSURL, "err", err)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: read the identity provider's keys at %s: %v", sale.ErrBusy, p.JWKSURL, err)
	}
	// The client refetches the set for an unknown key whenever asked: key asks it only when
	// the node's own limiter allows, so no token ever waits for the limiter. The library's
	// RateLimitWaitMax is the refetch's deadline too, hence jwksTimeout.
	client, err := jwkset.NewHTTPClient(jwkset.HTTPClientOptions{
		HTTPURLs:          map[string]jwkset.Storage{p.JWKSURL: keys},
		RefreshUnknownKID: rate.NewLimiter(rate.Inf, 1),
		RateLimitWaitMax:  jwksTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: the identity provider's keys: %v", sale.ErrInvalid, err)
	}
	jwks, err := keyfunc.New(keyfunc.Options{Ctx: ctx, Storage: client})
	if err != nil {
		return nil, fmt.Errorf("%w: the identity provider's keys: %v", sale.ErrInvalid, err)
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods([]string{jwt.SigningMethodRS256.Alg(), jwt.SigningMethodES256.Alg(), jwt.SigningMethodEdDSA.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(leeway),
		jwt.WithTimeFunc(now),
	}
	if p.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(p.Issuer))
	}
	if p.Audience != "" {
		opts = append(opts, jwt.WithAudience(p.Audience))
	}
	claim := p.UserClaim
	if claim == "" {
		claim = "sub"
	}
	return &idp{
		keys:    keys,
		jwks:    jwks,
		unknown: rate.NewLimiter(rate.Every(unknownKIDEvery), 1),
		parser:  jwt.NewParser(opts...),
		claim:   claim,
		created: p.CreatedClaim,
		trust:   p.TrustClaim,
	}, nil
}

// key is the verification key of t: the provider's key that t names (kid), if its type is the
// one t's algorithm is pinned to.
func (p *idp) key(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	if kid == "" {
		return nil, errors.New("the token names no key (kid)")
	}
	if _, err := p.keys.KeyRead(context.Background(), kid); errors.Is(err, jwkset.ErrKeyNotFound) && !p.unknown.Allow() {
		return nil, fmt.Errorf("the provider's set has no key %q, and it was fetched again too recently", kid)
	}
	k, err := p.jwks.Keyfunc(t)
	if err != nil {
		return nil, err
	}
	if ok := pinned[t.Method.Alg()]; ok == nil || !ok(k) {
		return nil, fmt.Errorf("a %T does not verify %s", k, t.Method.Alg())
	}
	return k, nil
}

// verify returns who a provider's token names and its expiry.
func (p *idp) verify(token string) (Identity, time.Time, error) {
	claims := jwt.MapClaims{}
	if _, err := p.parser.ParseWithClaims(token, claims, p.key); err != nil {
		return Identity{}, time.Time{}, fmt.Errorf("%w: %v", sale.ErrUnauthorized, reason(err))
	}
	user, _ := claims[p.claim].(string)
	if !ValidUser(user) {
		return Identity{}, time.Time{}, fmt.Errorf("%w: the token's %q claim is not a valid user id", sale.ErrUnauthorized, p.claim)
	}
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil {
		return Identity{}, time.Time{}, fmt.Errorf("%w: the token has no expiry", sale.ErrUnauthorized)
	}
	id := Identity{User: user}
	if p.created != "" {
		switch v := claims[p.created].(type) {
		case float64: // JSON numbers: seconds since the epoch
			if v > 0 && v < 1e11 {
				id.Created = time.Unix(int64(v), 0)
			}
		case string:
			id.Created, _ = time.Parse(time.RFC3339, v)
		}
	}
	if p.trust != "" {
		if v, ok := claims[p.trust].(float64); ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
			id.Trust, id.HasTrust = v, true
		}
	}
	return id, exp.Time, nil
}

// headerAlg is the algorithm a token's header names, without verifying anything: which of the
// node's verifiers is to check it. "" when the header cannot be read.
func headerAlg(token string) string {
	head, _, ok := strings.Cut(token, ".")
	if !ok || len(head) > 1024 {
		return ""
	}
	raw, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return ""
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if json.Unmarshal(raw, &h) != nil {
		return ""
	}
	return h.Alg
}
