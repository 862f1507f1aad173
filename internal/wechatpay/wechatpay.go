// Package wechatpay speaks WeChat Pay's API v3 (微信支付) for seckill's payments: a Native
// (QR code) or H5 order that starts a payment, the check and decryption of its notices, and the
// refund call.
//
// What the node sends is signed with the merchant's key: the Authorization header
// WECHATPAY2-SHA256-RSA2048 carries a SHA256withRSA signature over "METHOD\nPATH\nTIMESTAMP\n
// NONCE\nBODY\n". What WeChat Pay sends (an answer, a notice) is checked with the platform's
// public key named by its Wechatpay-Serial header, over "TIMESTAMP\nNONCE\nBODY\n", and refused
// when its timestamp is more than five minutes from the node's clock. A notice's resource is
// encrypted with the merchant's API v3 key (AEAD_AES_256_GCM, the tag at the end of the
// ciphertext). All of it on the standard library's crypto.
package wechatpay

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rsa"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"seckill/internal/rsasig"
)

// DefaultAPI is WeChat Pay's API base URL.
const DefaultAPI = "https://api.mch.weixin.qq.com"

// Tolerance is how far a signed timestamp may be from the node's clock.
const Tolerance = 5 * time.Minute

// The headers of a signed answer or notice.
const (
	HeaderTimestamp = "Wechatpay-Timestamp"
	HeaderNonce     = "Wechatpay-Nonce"
	HeaderSignature = "Wechatpay-Signature"
	HeaderSerial    = "Wechatpay-Serial"
)

// The refusals of a signed message. Each means it changes nothing.
var (
	ErrSignature = errors.New("wechatpay: the signature does not verify")
	ErrSerial    = errors.New("wechatpay: signed with a platform key we do not know")
	ErrStale     = errors.New("wechatpay: the signature's timestamp is over five minutes off")
	ErrDecrypt   = errors.New("wechatpay: the resource does not decrypt with the API v3 key")
)

// RequestMessage is what a request's signature covers.
func RequestMessage(method, pathAndQuery, timestamp, nonce string, body []byte) string {
	return method + "\n" + pathAndQuery + "\n" + timestamp + "\n" + nonce + "\n" + string(body) + "\n"
}

// ResponseMessage is what an answer's or a notice's signature covers.
func ResponseMessage(timestamp, nonce string, body []byte) string {
	return timestamp + "\n" + nonce + "\n" + string(body) + "\n"
}

// Sign is the SHA256withRSA signature of message with key, base64.
func Sign(key *rsa.PrivateKey, message string) (string, error) {
	sig, err := rsasig.Sign(key, message)
	if err != nil {
		return "", fmt.Errorf("wechatpay: %w", err)
	}
	return sig, nil
}

// ParsePrivateKey reads the merchant's RSA private key (apiclient_key.pem): PEM, PKCS #8 or
// PKCS #1.
func ParsePrivateKey(data []byte) (*rsa.PrivateKey, error) {
	k, err := rsasig.ParsePrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("wechatpay: %w", err)
	}
	return k, nil
}

// ParsePublicKey reads WeChat Pay's public key (pub_key.pem), or a platform certificate's.
func ParsePublicKey(data []byte) (*rsa.PublicKey, error) {
	k, err := rsasig.ParsePublicKey(data)
	if err != nil {
		return nil, fmt.Errorf("wechatpay: %w", err)
	}
	return k, nil
}

// Verifier checks what WeChat Pay signs, with its platform keys by serial, on a clock.
type Verifier struct {
	Keys map[string]*rsa.PublicKey // serial -> WeChat Pay's platform (or public) key
	Now  func() time.Time          // nil: time.Now
}

// Verify checks that body came from WeChat Pay with the signature headers h: a key we know by
// its serial, a timestamp within Tolerance, and the signature. Errors: ErrSerial, ErrStale,
// ErrSignature.
func (v Verifier) Verify(h http.Header, body []byte) error {
	key, ok := v.Keys[h.Get(HeaderSerial)]
	if !ok {
		return ErrSerial
	}
	ts := h.Get(HeaderTimestamp)
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrStale
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	if d := now().Sub(time.Unix(secs, 0)); d > Tolerance || d < -Tolerance {
		return ErrStale
	}
	if !rsasig.Verify(key, ResponseMessage(ts, h.Get(HeaderNonce), body), h.Get(HeaderSignature)) {
		return ErrSignature
	}
	return nil
}

// Resource is a notice's encrypted resource.
type Resource struct {
	Algorithm      string `json:"algorithm"`
	Ciphertext     string `json:"ciphertext"` // base64: the sealed plaintext, tag at the end
	AssociatedData string `json:"associated_data"`
	OriginalType   string `json:"original_type"`
	Nonce          string `json:"nonce"`
}

// Decrypt opens r with the API v3 key (32 bytes). Errors: ErrDecrypt.
func (r Resource) Decrypt(apiV3Key []byte) ([]byte, error) {
	if r.Algorithm != "AEAD_AES_256_GCM" || len(apiV3Key) != 32 {
		return nil, ErrDecrypt
	}
	sealed, err := base64.StdEncoding.DecodeString(r.Ciphertext)
	if err != nil {
		return nil, ErrDecrypt
	}
	block, err := aes.NewCipher(apiV3Key)
	if err != nil {
		return nil, ErrDecrypt
	}
	gcm, err := cipher.NewGCMWithNonceSize(block, len(r.Nonce))
	if err != nil || len(r.Nonce) == 0 {
		return nil, ErrDecrypt
	}
	plain, err := gcm.Open(nil, []byte(r.Nonce), sealed, []byte(r.AssociatedData))
	if err != nil {
		return nil, ErrDecrypt
	}
	return plain, nil
}

// Seal is Decrypt's inverse: what WeChat Pay does to a notice's resource (for tests and fakes).
func Seal(apiV3Key []byte, nonce, associatedData string, plain []byte) (Resource, error) {
	block, err := aes.NewCipher(apiV3Key)
	if err != nil {
		return Resource{}, err
	}
	gcm, err := cipher.NewGCMWithNonceSize(block, len(nonce))
	if err != nil {
		return Resource{}, err
	}
	return Resource{Algorithm: "AEAD_AES_256_GCM", Nonce: nonce, AssociatedData: associatedData,
		Ciphertext: base64.StdEncoding.EncodeToString(gcm.Seal(nil, []byte(nonce), plain, []byte(associatedData)))}, nil
}
