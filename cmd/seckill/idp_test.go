package main

import (
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// TestIdentityProviderTokenBuysAUnit runs the binary with SECKILL_JWKS_URL pointing at an
// identity provider's JWK Set served on loopback: the provider's RS256 token buys a unit and
// reads its order, a token of another issuer is refused, and the node's own HS256 tokens still
// buy beside it.
func TestIdentityProviderTokenBuysAUnit(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwk, err := jwkset.NewJWKFromKey(key.Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: "shop-1", ALG: jwkset.AlgRS256, USE: jwkset.UseSig}})
	if err != nil {
		t.Fatal(err)
	}
	set := jwkset.NewMemoryStorage()
	if err := set.KeyWrite(t.Context(), jwk); err != nil {
		t.Fatal(err)
	}
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := set.JSONPublic(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(raw)
	}))
	t.Cleanup(idp.Close)
	const issuer, audience = "https://id.shop.test/realms/shop", "seckill"
	base := startRun(t, testEnv(sqliteDSN(t), "SECKILL_JWKS_URL", idp.URL, "SECKILL_JWT_ISSUER", issuer,
		"SECKILL_JWT_AUDIENCE", audience))
	c := newClient(t, base)
	id := c.createItem(5, 1, time.Minute)

	token := func(user, iss string) string {
		now := time.Now()
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"sub": user, "iss": iss, "aud": audience,
			"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
		tok.Header["kid"] = "shop-1"
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	buyer := token("shopper-7", issuer)
	grab := c.must("POST", "/api/activities/"+id+"/grab", buyer, "", http.StatusAccepted)
	order := grab["order_token"].(string)
	c.must("POST", "/api/activities/"+id+"/grab", token("mallory", "https://evil.test"), "", http.StatusUnauthorized)
	c.must("POST", "/api/activities/"+id+"/grab", c.token("alice"), "", http.StatusAccepted)

	st := c.drained(id)
	if st["orders"] != 2.0 || st["created"] != 2.0 {
		t.Fatalf("stats after two grabs: %v; want 2 created orders", st)
	}
	o := c.must("GET", "/api/orders/"+order, buyer, "", http.StatusOK)
	if o["status"] != "CREATED" || o["activity_id"] != id {
		t.Fatalf("the provider's user's order: %v", o)
	}
	// Someone else's order is not theirs to read, whoever issued their token.
	c.must("GET", "/api/orders/"+order, c.token("alice"), "", http.StatusNotFound)
}
