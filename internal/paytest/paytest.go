// Package paytest is for the tests of the payment providers' packages (internal/alipay,
// internal/wechatpay): the RSA keys they sign and verify with, generated once per test process
// (a 2048-bit key takes a good fraction of a second).
package paytest

import (
	"crypto/rand"
	"crypto/rsa"
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
