package rsasig_test

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"seckill/internal/paytest"
	"seckill/internal/rsasig"
)

func TestSignVerify(t *testing.T) {
	key, other := paytest.Key(0), paytest.Key(1)
	sig, err := rsasig.Sign(key, "a=1&b=2")
	if err != nil {
		t.Fatal(err)
	}
	if !rsasig.Verify(&key.PublicKey, "a=1&b=2", sig) {
		t.Error("the signature does not verify")
	}
	for name, tc := range map[string]struct{ msg, sig string }{
		"another message": {"a=1&b=3", sig}, "not base64": {"a=1&b=2", "%%%"}, "empty": {"a=1&b=2", ""},
		"another key": {"a=1&b=2", must(rsasig.Sign(other, "a=1&b=2"))},
	} {
		if rsasig.Verify(&key.PublicKey, tc.msg, tc.sig) {
			t.Errorf("%s verifies", name)
		}
	}
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}

// TestKeys: the private key as PKCS #8 and #1, the public key as PKIX, PKCS #1 and a
// certificate's (a WeChat Pay platform certificate); anything else is refused.
func TestKeys(t *testing.T) {
	key := paytest.Key(0)
	p8, _ := x509.MarshalPKCS8PrivateKey(key)
	for name, data := range map[string][]byte{
		"PKCS #8": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8}),
		"PKCS #1": pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
	} {
		if k, err := rsasig.ParsePrivateKey(data); err != nil || !k.Equal(key) {
			t.Errorf("%s: %v", name, err)
		}
	}
	pkix8, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "Tenpay.com Root CA"},
		NotBefore: time.Unix(0, 0), NotAfter: time.Unix(1<<33, 0)}
	cert, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"PKIX":        pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pkix8}),
		"PKCS #1":     pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&key.PublicKey)}),
		"certificate": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert}),
	} {
		if k, err := rsasig.ParsePublicKey(data); err != nil || !k.Equal(&key.PublicKey) {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, data := range map[string][]byte{"not PEM": []byte("MIIB..."), "garbage": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1, 2}})} {
		if _, err := rsasig.ParsePublicKey(data); err == nil {
			t.Errorf("public key, %s: read", name)
		}
		if _, err := rsasig.ParsePrivateKey(data); err == nil {
			t.Errorf("private key, %s: read", name)
		}
	}
}
