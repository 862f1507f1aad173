package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"seckill/internal/sale"
)

// idpKey is a signing key of a test identity provider.
type idpKey struct {
	kid    string
	method jwt.SigningMethod
	alg    jwkset.ALG
	signer crypto.Signer
}

func newKey(t *testing.T, kid string, method jwt.SigningMethod) idpKey {
	t.Helper()
	var signer crypto.Signer
	var err error
	var alg jwkset.ALG
	switch method {
	case jwt.SigningMethodRS256:
		signer, err = rsa.GenerateKey(rand.Reader, 2048)
		alg = jwkset.AlgRS256
	case jwt.SigningMethodES256:
		signer, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		alg = jwkset.AlgES256
	case jwt.SigningMethodEdDSA:
		_, signer, err = ed25519.GenerateKey(rand.Reader)
		alg = jwkset.AlgEdDSA
	}
	if err != nil {
		t.Fatal(err)
	}
	return idpKey{kid: kid, method: method, alg: alg, signer: signer}
}

// fakeIdP serves a JWK Set on loopback, as an identity provider's jwks_uri does, and counts the
// fetches.
type fakeIdP struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	keys    []idpKey
	fetches atomic.Int64
	slow    atomic.Int64 // how long each fetch takes, in nanoseconds, as a distant provider's do
}

func newIdP(t *testing.T, keys ...idpKey) *fakeIdP {
	p := &fakeIdP{t: t, keys: keys}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.fetches.Add(1)
		time.Sleep(time.Duration(p.slow.Load()))
		p.mu.Lock()
		keys := append([]idpKey(nil), p.keys...)
		p.mu.Unlock()
		set := jwkset.NewMemoryStorage()
		for _, k := range keys {
			jwk, err := jwkset.NewJWKFromKey(k.signer.Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: k.kid, ALG: k.alg, USE: jwkset.UseSig}})
			if err != nil {
				t.Error(err)
				return
			}
			set.KeyWrite(r.Context(), jwk)
		}
		raw, err := set.JSONPublic(r.Context())
		if err != nil {
			t.Error(err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(raw)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *fakeIdP) rotate(keys ...idpKey) {
	p.mu.Lock()
	p.keys = keys
	p.mu.Unlock()
}

// signBy is a token of k's with claims, its kid in the header.
func signBy(t *testing.T, k idpKey, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(k.method, claims)
	tok.Header["kid"] = k.kid
	s, err := tok.SignedString(k.signer)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const testIssuer, testAudience = "https://id.example.test/realms/shop", "seckill"

func claimsFor(user string, now time.Time) jwt.MapClaims {
	return jwt.MapClaims{"sub": user, "iss": testIssuer, "aud": testAudience, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
}

func openWith(t *testing.T, p *fakeIdP, prov Provider, now func() time.Time) *Tokens {
	t.Helper()
	prov.JWKSURL = p.srv.URL
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	tk, err := Open(ctx, Config{Secret: []byte(strings.Repeat("s", MinSecretLen)), Now: now, Provider: &prov})
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// TestProviderTokens: a provider's RS256, ES256 and EdDSA tokens name their users; the node's
// own HS256 tokens still verify beside them; and every way a token can be wrong is refused.
func TestProviderTokens(t *testing.T) {
	now := time.Now()
	rs, es, ed := newKey(t, "rs-1", jwt.SigningMethodRS256), newKey(t, "es-1", jwt.SigningMethodES256), newKey(t, "ed-1", jwt.SigningMethodEdDSA)
	idp := newIdP(t, rs, es, ed)
	tk := openWith(t, idp, Provider{Issuer: testIssuer, Audience: testAudience}, func() time.Time { return now })

	for _, k := range []idpKey{rs, es, ed} {
		user := "user-" + k.kid
		if got, err := tk.Verify(signBy(t, k, claimsFor(user, now))); err != nil || got != user {
			t.Errorf("%s token: %q, %v; want %s", k.method.Alg(), got, err, user)
		}
	}
	own, err := tk.Mint("alice", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tk.Verify(own); err != nil || got != "alice" {
		t.Fatalf("the node's own token beside a provider: %q, %v", got, err)
	}

	other := newKey(t, "rs-1", jwt.SigningMethodRS256) // the provider's kid, someone else's key
	rsaDER, err := x509.MarshalPKIXPublicKey(rs.signer.Public())
	if err != nil {
		t.Fatal(err)
	}
	confused := jwt.NewWithClaims(jwt.SigningMethodHS256, claimsFor("mallory", now))
	confused.Header["kid"] = rs.kid
	hsWithPublicKey, err := confused.SignedString(rsaDER) // HS/RS confusion: the public key as the secret
	if err != nil {
		t.Fatal(err)
	}
	noKid := jwt.NewWithClaims(jwt.SigningMethodRS256, claimsFor("mallory", now))
	unnamed, err := noKid.SignedString(rs.signer)
	if err != nil {
		t.Fatal(err)
	}
	none := jwt.NewWithClaims(jwt.SigningMethodNone, claimsFor("mallory", now))
	none.Header["kid"] = rs.kid
	unsigned, err := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	// An ES256 header over the RSA key's kid: the algorithm is pinned to the key's type.
	esOverRSA := signBy(t, idpKey{kid: rs.kid, method: jwt.SigningMethodES256, signer: es.signer}, claimsFor("mallory", now))
	with := func(change func(c jwt.MapClaims)) string {
		c := claimsFor("mallory", now)
		change(c)
		return signBy(t, rs, c)
	}
	for name, token := range map[string]string{
		"another issuer":              with(func(c jwt.MapClaims) { c["iss"] = "https://evil.example.test" }),
		"no issuer":                   with(func(c jwt.MapClaims) { delete(c, "iss") }),
		"another audience":            with(func(c jwt.MapClaims) { c["aud"] = "payments" }),
		"expired":                     with(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Minute).Unix() }),
		"no expiry":                   with(func(c jwt.MapClaims) { delete(c, "exp") }),
		"not valid yet":               with(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Minute).Unix() }),
		"no user":                     with(func(c jwt.MapClaims) { delete(c, "sub") }),
		"a user id with spaces":       with(func(c jwt.MapClaims) { c["sub"] = "two words" }),
		"signed by another key":       signBy(t, other, claimsFor("mallory", now)),
		"HS256 with the public key":   hsWithPublicKey,
		"alg none":                    unsigned,
		"no kid":                      unnamed,
		"ES256 over an RSA key":       esOverRSA,
		"garbage":                     "not.a.token",
		"a header that is not JSON":   "bm90IGpzb24.e30.c2ln",
		"empty":                       "",
		"a kid the set does not have": signBy(t, newKey(t, "rs-9", jwt.SigningMethodRS256), claimsFor("mallory", now)),
	} {
		if got, err := tk.Verify(token); !errors.Is(err, sale.ErrUnauthorized) {
			t.Errorf("%s: %q, %v; want ErrUnauthorized", name, got, err)
		}
	}
}

// TestProviderUserClaim: the user may come from a claim other than sub.
func TestProviderUserClaim(t *testing.T) {
	now := time.Now()
	k := newKey(t, "ed-1", jwt.SigningMethodEdDSA)
	tk := openWith(t, newIdP(t, k), Provider{UserClaim: "preferred_username"}, func() time.Time { return now })
	c := claimsFor("ignored-sub", now)
	c["preferred_username"] = "bob"
	if got, err := tk.Verify(signBy(t, k, c)); err != nil || got != "bob" {
		t.Fatalf("user from preferred_username: %q, %v", got, err)
	}
	if _, err := tk.Verify(signBy(t, k, claimsFor("carol", now))); !errors.Is(err, sale.ErrUnauthorized) {
		t.Fatalf("a token without the user claim: %v, want ErrUnauthorized", err)
	}
}

// TestProviderAccountClaims: the claims Provider names say when the account was created (a
// NumericDate or an RFC 3339 string) and its trust level; they are remembered with the token, a
// claim of another type is ignored, and the node's own tokens carry none.
func TestProviderAccountClaims(t *testing.T) {
	now := time.Now()
	k := newKey(t, "es-1", jwt.SigningMethodES256)
	tk := openWith(t, newIdP(t, k), Provider{CreatedClaim: "created_at", TrustClaim: "trust_level"}, func() time.Time { return now })
	created := now.Add(-400 * 24 * time.Hour).Truncate(time.Second)
	c := claimsFor("ann", now)
	c["created_at"], c["trust_level"] = created.Unix(), 0.8
	tok := signBy(t, k, c)
	for range 2 { // verified, then remembered
		if id, err := tk.Identify(tok); err != nil || id.User != "ann" || !id.Created.Equal(created) || !id.HasTrust || id.Trust != 0.8 {
			t.Fatalf("ann's identity: %+v, %v", id, err)
		}
	}
	c = claimsFor("bob", now)
	c["created_at"], c["trust_level"] = created.Format(time.RFC3339), "high"
	if id, err := tk.Identify(signBy(t, k, c)); err != nil || !id.Created.Equal(created) || id.HasTrust {
		t.Fatalf("bob's identity (a date string, a word for a trust): %+v, %v", id, err)
	}
	own, err := tk.Mint("carol", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := tk.Identify(own); err != nil || id != (Identity{User: "carol"}) {
		t.Fatalf("the node's own token: %+v, %v", id, err)
	}
}

// TestProviderKeyRotation: the provider rotates its key mid-sale; the first token signed by the
// new key makes the node fetch the set again and is accepted, and a flood of made-up key ids
// costs no more fetches than the limiter allows.
func TestProviderKeyRotation(t *testing.T) {
	now := time.Now()
	old, fresh := newKey(t, "k-2026-1", jwt.SigningMethodRS256), newKey(t, "k-2026-2", jwt.SigningMethodRS256)
	idp := newIdP(t, old)
	tk := openWith(t, idp, Provider{}, func() time.Time { return now })
	if _, err := tk.Verify(signBy(t, old, claimsFor("u1", now))); err != nil {
		t.Fatal(err)
	}
	started := idp.fetches.Load()
	idp.rotate(old, fresh)
	// A provider across the internet answers in tens of milliseconds: the refetch must be
	// given that time, not the no-wait budget of the limiter in front of it.
	idp.slow.Store(int64(50 * time.Millisecond))
	if got, err := tk.Verify(signBy(t, fresh, claimsFor("u2", now))); err != nil || got != "u2" {
		t.Fatalf("a token of the rotated-in key: %q, %v; want it accepted after a refetch", got, err)
	}
	if n := idp.fetches.Load() - started; n != 1 {
		t.Fatalf("%d fetches for one rotated-in key, want 1", n)
	}
	for i := range 200 {
		made := signBy(t, idpKey{kid: "made-up-" + string(rune('a'+i%26)) + time.Duration(i).String(), method: jwt.SigningMethodRS256, signer: old.signer},
			claimsFor("bot", now))
		if _, err := tk.Verify(made); !errors.Is(err, sale.ErrUnauthorized) {
			t.Fatalf("made-up kid: %v, want ErrUnauthorized", err)
		}
	}
	// One more fetch at most: the limiter allows one every unknownKIDEvery, and this loop is
	// over far sooner.
	if n := idp.fetches.Load() - started; n > 2 {
		t.Fatalf("%d fetches after 200 made-up key ids, want at most 2", n)
	}
	if got, err := tk.Verify(signBy(t, old, claimsFor("u3", now))); err != nil || got != "u3" {
		t.Fatalf("the old key after the flood: %q, %v", got, err)
	}
}

// TestProviderUnreachableAtStart: a node whose provider's keys cannot be read does not start.
func TestProviderUnreachableAtStart(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // nothing listens there now
	_, err := Open(context.Background(), Config{Secret: []byte(strings.Repeat("s", MinSecretLen)),
		Provider: &Provider{JWKSURL: srv.URL}})
	if !errors.Is(err, sale.ErrBusy) {
		t.Fatalf("Open with no provider listening: %v, want ErrBusy", err)
	}
}
