// Package paytest is for the tests of the payment providers: the RSA keys they sign and verify
// with, generated once per test process (a 2048-bit key takes a good fraction of a second), and
// fakes of Alipay's gateway and WeChat Pay's API that a node's tests pay at, each checking every
// signature the node sends and signing what it sends back.
package paytest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Keys is how many keys Key hands out.
const Keys = 3

var keys = sync.OnceValue(func() [Keys]*rsa.PrivateKey {
	var out [Keys]*rsa.PrivateKey
	for i := range out {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		out[i] = k
	}
	return out
})

// Key is the test process's i-th RSA key (0 ≤ i < Keys): the same key each time it is asked for.
func Key(i int) *rsa.PrivateKey { return keys()[i] }

// WritePEM writes key i's private key (PKCS #8) and public key (PKIX) as PEM files in dir and
// returns their paths: what a node is configured with.
func WritePEM(dir string, i int) (private, public string, err error) {
	k := Key(i)
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return "", "", err
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return "", "", err
	}
	private, public = filepath.Join(dir, fmt.Sprintf("key%d.pem", i)), filepath.Join(dir, fmt.Sprintf("key%d.pub.pem", i))
	if err := os.WriteFile(private, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return "", "", err
	}
	return private, public, os.WriteFile(public, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

// WriteKeys writes the keys of a node and its provider as PEM files in dir: the node's private
// key (key 0: an Alipay app's, a WeChat Pay merchant's) and the provider's public key (key 1,
// whose private half the fakes sign with).
func WriteKeys(dir string) (ours, theirs string, err error) {
	if ours, _, err = WritePEM(dir, 0); err != nil {
		return "", "", err
	}
	_, theirs, err = WritePEM(dir, 1)
	return ours, theirs, err
}
