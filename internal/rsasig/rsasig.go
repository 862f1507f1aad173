// Package rsasig is the signature Alipay (its "RSA2") and WeChat Pay (its
// "SHA256-RSA2048") both use: RSASSA-PKCS1-v1_5 over the SHA-256 of a message, in base64; the PEM
// keys they hand out; and the time zone of their timestamps. Each provider's package builds
// its own message; this is the one place the bytes are signed and checked.
package rsasig

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// Beijing is the providers' time zone, fixed (no tzdata needed): China keeps no daylight saving
// time.
var Beijing = time.FixedZone("CST", 8*60*60)

// Sign is the signature of message with key, base64.
func Sign(key *rsa.PrivateKey, message string) (string, error) {
	sum := sha256.Sum256([]byte(message))
	sig, err := rsa.SignPKCS1v15(nil, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// Verify reports whether sig (base64) is the signature of message with key.
func Verify(key *rsa.PublicKey, message, sig string) bool {
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || len(raw) == 0 {
		return false
	}
	sum := sha256.Sum256([]byte(message))
	return rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], raw) == nil
}

// ParsePrivateKey reads an RSA private key: PEM, PKCS #8 or PKCS #1.
func ParsePrivateKey(data []byte) (*rsa.PrivateKey, error) {
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, errors.New("the private key is not PEM")
	}
	if k, err := x509.ParsePKCS1PrivateKey(b.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("the private key: %w", err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, errors.New("the private key is not RSA")
	}
	return rk, nil
}

// ParsePublicKey reads an RSA public key: PEM, PKIX ("PUBLIC KEY"), PKCS #1, or the public key
// of an X.509 certificate (a WeChat Pay platform certificate).
func ParsePublicKey(data []byte) (*rsa.PublicKey, error) {
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, errors.New("the public key is not PEM")
	}
	if k, err := x509.ParsePKCS1PublicKey(b.Bytes); err == nil {
		return k, nil
	}
	var k any
	if b.Type == "CERTIFICATE" {
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("the certificate: %w", err)
		}
		k = c.PublicKey
	} else {
		var err error
		if k, err = x509.ParsePKIXPublicKey(b.Bytes); err != nil {
			return nil, fmt.Errorf("the public key: %w", err)
		}
	}
	rk, ok := k.(*rsa.PublicKey)
	if !ok {
		return nil, errors.New("the public key is not RSA")
	}
	return rk, nil
}
