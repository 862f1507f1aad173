package main

import (
	"crypto/rand"
	"crypto/rsa"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"seckill/internal/risk"
)

// TestIdentityProviderTokenBuysAUnit runs the binary with SECKILL_JWKS_URL pointing at an
// identity provider's JWK Set served on loopback: the provider's RS256 token buys a unit and
// reads its order, a token of another issuer is refused, and the node's own HS256 tokens still
// buy beside it. The account claims the settings name reach the risk features the node records.
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
	record := filepath.Join(t.TempDir(), "risk.jsonl")
	base := startRun(t, testEnv(sqliteDSN(t), "SECKILL_JWKS_URL", idp.URL, "SECKILL_JWT_ISSUER", issuer,
		"SECKILL_JWT_AUDIENCE", audience, "SECKILL_JWT_CREATED_CLAIM", "created_at", "SECKILL_JWT_TRUST_CLAIM", "trust",
		"SECKILL_RISK_RECORD", record))
	c := newClient(t, base)
	id := c.CreateItem(5, 1, time.Minute)

	token := func(user, iss string) string {
		now := time.Now()
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"sub": user, "iss": iss, "aud": audience,
			"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "created_at": now.Add(-400 * 24 * time.Hour).Unix(), "trust": 0.9})
		tok.Header["kid"] = "shop-1"
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	buyer := token("shopper-7", issuer)
	grab := c.Must("POST", "/api/activities/"+id+"/grab", buyer, "", http.StatusAccepted)
	order := grab["order_token"].(string)
	c.Must("POST", "/api/activities/"+id+"/grab", token("mallory", "https://evil.test"), "", http.StatusUnauthorized)
	c.Must("POST", "/api/activities/"+id+"/grab", c.Token("alice"), "", http.StatusAccepted)

	st := c.Drained(id)
	if st["orders"] != 2.0 || st["created"] != 2.0 {
		t.Fatalf("stats after two grabs: %v; want 2 created orders", st)
	}
	o := c.Must("GET", "/api/orders/"+order, buyer, "", http.StatusOK)
	if o["status"] != "CREATED" || o["activity_id"] != id {
		t.Fatalf("the provider's user's order: %v", o)
	}
	// Someone else's order is not theirs to read, whoever issued their token.
	c.Must("GET", "/api/orders/"+order, c.Token("alice"), "", http.StatusNotFound)

	// The node writes its recording out every 2 s.
	features := map[string]map[string]float64{}
	for deadline := time.Now().Add(15 * time.Second); len(features) < 2; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the risk recording has %v, want the two grabs that passed the edge", features)
		}
		f, err := os.Open(record)
		if err != nil {
			continue
		}
		recs, err := risk.ReadRecords(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			features[r.User] = r.Features
		}
	}
	if f := features["shopper-7"]; f["claims"] != 1 || math.Abs(f["account_age"]-math.Log1p(400)) > 0.01 || f["trust"] != 0.9 {
		t.Errorf("the provider's user's features: claims %v, account age %v (log days), trust %v", f["claims"], f["account_age"], f["trust"])
	}
	if f := features["alice"]; f["claims"] != 0 || f["trust"] != 0 {
		t.Errorf("the node's own token's features: %v", f)
	}
}
