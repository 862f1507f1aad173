package auth

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"seckill/internal/saletest"

	"github.com/golang-jwt/jwt/v5"

	"seckill/internal/sale"
)

var secret = []byte("0123456789abcdef0123456789abcdef")

func newTokens(t testing.TB) *Tokens {
	t.Helper()
	tk, err := New(secret, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func sign(t testing.TB, m jwt.SigningMethod, key any, claims jwt.Claims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestVerify(t *testing.T) {
	tk := newTokens(t)
	now := time.Now()
	valid := jwt.RegisteredClaims{Subject: "alice", ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))}
	good, err := tk.Mint("alice", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	noneToken := b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + b64([]byte(`{"sub":"alice","exp":9999999999}`)) + "."
	tests := []struct {
		name  string
		token string
		user  string // "" = refused
	}{
		{"minted", good, "alice"},
		{"signed by hand", sign(t, jwt.SigningMethodHS256, secret, valid), "alice"},
		{"alg none", noneToken, ""},
		{"HS512", sign(t, jwt.SigningMethodHS512, secret, valid), ""},
		{"wrong secret", sign(t, jwt.SigningMethodHS256, []byte("another secret, 32 bytes long!!!"), valid), ""},
		{"expired", sign(t, jwt.SigningMethodHS256, secret, jwt.RegisteredClaims{Subject: "alice", ExpiresAt: jwt.NewNumericDate(now.Add(-time.Minute))}), ""},
		{"no expiry", sign(t, jwt.SigningMethodHS256, secret, jwt.RegisteredClaims{Subject: "alice"}), ""},
		{"no subject", sign(t, jwt.SigningMethodHS256, secret, jwt.RegisteredClaims{ExpiresAt: valid.ExpiresAt}), ""},
		{"subject with spaces", sign(t, jwt.SigningMethodHS256, secret, jwt.RegisteredClaims{Subject: "a b", ExpiresAt: valid.ExpiresAt}), ""},
		{"subject too long", sign(t, jwt.SigningMethodHS256, secret, jwt.RegisteredClaims{Subject: strings.Repeat("a", MaxUserLen+1), ExpiresAt: valid.ExpiresAt}), ""},
		{"tampered payload", good[:strings.Index(good, ".")+1] + b64([]byte(`{"sub":"mallory","exp":9999999999}`)) + good[strings.LastIndex(good, "."):], ""},
		{"garbage", "not.a.token", ""},
		{"empty", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			user, err := tk.Verify(tc.token)
			if tc.user == "" {
				if err == nil || !errors.Is(err, sale.ErrUnauthorized) {
					t.Fatalf("Verify = %q, %v; want ErrUnauthorized", user, err)
				}
				return
			}
			if err != nil || user != tc.user {
				t.Fatalf("Verify = %q, %v; want %q", user, err, tc.user)
			}
		})
	}
}

func TestNewRefusesShortSecrets(t *testing.T) {
	if _, err := New([]byte("short"), time.Now); !errors.Is(err, sale.ErrInvalid) {
		t.Fatalf("New(short) = %v, want ErrInvalid", err)
	}
}

func TestMintRefusesBadUsers(t *testing.T) {
	tk := newTokens(t)
	for _, u := range []string{"", "a b", strings.Repeat("x", MaxUserLen+1), "é"} {
		if _, err := tk.Mint(u, time.Now(), time.Hour); !errors.Is(err, sale.ErrInvalid) {
			t.Errorf("Mint(%q) = %v, want ErrInvalid", u, err)
		}
	}
}

func TestEqual(t *testing.T) {
	if !Equal("abc", "abc") || Equal("abc", "abd") || Equal("abc", "abcd") || Equal("", "x") {
		t.Fatal("Equal compares wrongly")
	}
}

// FuzzVerify feeds arbitrary strings to the parser: it must never panic, must refuse with
// ErrUnauthorized, and may accept only tokens that carry our signature over their own content.
func FuzzVerify(f *testing.F) {
	tk := newTokens(f)
	good, _ := tk.Mint("alice", time.Now(), time.Hour)
	for _, s := range []string{good, "", ".", "..", "a.b.c", good + "x", strings.ToUpper(good),
		"eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0.", "eyJhbGciOiJIUzI1NiJ9.e30.AAAA"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		user, err := tk.Verify(s)
		if err != nil {
			if !errors.Is(err, sale.ErrUnauthorized) {
				t.Fatalf("Verify(%q) error %v does not wrap ErrUnauthorized", s, err)
			}
			return
		}
		if !ValidUser(user) {
			t.Fatalf("Verify(%q) accepted invalid user %q", s, user)
		}
		// An accepted token must be one whose signature we made: re-signing its header and
		// claims reproduces it.
		parts := strings.Split(s, ".")
		if len(parts) != 3 {
			t.Fatalf("Verify accepted %q with %d parts", s, len(parts))
		}
		sig, err := jwt.SigningMethodHS256.Sign(parts[0]+"."+parts[1], secret)
		if err != nil || base64.RawURLEncoding.EncodeToString(sig) != strings.TrimRight(parts[2], "=") {
			t.Fatalf("Verify accepted %q, whose signature is not ours", s)
		}
	})
}

// TestVerifiedTokensAreRemembered: a token verified once is answered from memory, but never
// past its expiry (the parser then decides, leeway included), and a token that failed is never
// remembered.
func TestVerifiedTokensAreRemembered(t *testing.T) {
	tk := newTokens(t)
	now := saletest.T0
	tk.now = func() time.Time { return now }
	tok, err := tk.Mint("alice", now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if u, err := tk.Verify(tok); err != nil || u != "alice" {
		t.Fatalf("Verify = %q, %v", u, err)
	}
	if id, ok := tk.recent.get(tok, now); !ok || id.User != "alice" {
		t.Fatal("a verified token is not remembered")
	}
	now = now.Add(time.Minute + 2*time.Second) // expired, within the leeway
	if _, ok := tk.recent.get(tok, now); ok {
		t.Fatal("remembered past its expiry")
	}
	if u, err := tk.Verify(tok); err != nil || u != "alice" {
		t.Fatalf("within the leeway: %q, %v", u, err)
	}
	now = now.Add(10 * time.Second)
	if _, err := tk.Verify(tok); !errors.Is(err, sale.ErrUnauthorized) {
		t.Fatalf("past expiry and leeway: %v; memory must not keep a token alive", err)
	}
	bad := tok[:len(tok)-2] + "xx"
	if _, err := tk.Verify(bad); err == nil {
		t.Fatal("a forged signature passed")
	}
	if _, ok := tk.recent.get(bad, now); ok {
		t.Fatal("a refused token was remembered")
	}
}

// TestRememberedTokensAreBounded: however many tokens a crowd sends, memory holds at most
// shardCap per shard.
func TestRememberedTokensAreBounded(t *testing.T) {
	var r recent
	r.init()
	exp := time.Now().Add(time.Hour)
	for i := range 3 * shardCap * len(r.shards) {
		r.put(strings.Repeat("t", 8)+time.Duration(i).String(), Identity{User: "u"}, exp)
	}
	for i := range r.shards {
		if n := len(r.shards[i].m); n > shardCap {
			t.Fatalf("shard %d holds %d tokens, more than %d", i, n, shardCap)
		}
	}
}

// BenchmarkIdentify verifies tokens the node minted, each new to it (an all-win crowd, one user
// a request: the memory of recent tokens never answers), and one token again and again:
//
//	go test -run '^$' -bench Identify -benchmem ./internal/auth
func BenchmarkIdentify(b *testing.B) {
	tk := newTokens(b)
	now := time.Now()
	toks := make([]string, 1<<16)
	for i := range toks {
		toks[i] = fmt.Sprint("user-", i)
		var err error
		if toks[i], err = tk.Mint(toks[i], now, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("new", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, _, err := tk.verify(toks[i%len(toks)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("repeated", func(b *testing.B) {
		for b.Loop() {
			if _, err := tk.Identify(toks[0]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
