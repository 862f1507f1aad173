// Package webhook delivers order events to HTTP receivers, one signed JSON POST an event, and
// signs and checks bodies with the scheme the webhooks and the payment callbacks share:
//
//	Seckill-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
//
// A receiver recomputes the HMAC over the timestamp, a dot and the raw body, compares it in
// constant time and refuses a timestamp too far from its clock, so that a body seen once cannot
// be sent again later.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"seckill/internal/relay"
	"seckill/internal/sale"
)

// SignatureHeader is the header that carries a body's signature.
const SignatureHeader = "Seckill-Signature"

// Tolerance is how far a signature's timestamp may be from the receiver's clock.
const Tolerance = 5 * time.Minute

// The reasons Verify refuses a body.
var (
	ErrNoSignature  = errors.New("no Seckill-Signature header, or not t=...,v1=...")
	ErrBadSignature = errors.New("the signature does not match the body")
	ErrStale        = errors.New("the signature's timestamp is too far from now")
)

// Sign returns the Seckill-Signature value of body, signed with secret at t.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks that header (a Seckill-Signature value) signs body with secret, at a time within
// tolerance of now. A header may carry several v1 values (a secret being rotated): one match is
// enough. Errors: ErrNoSignature, ErrBadSignature, ErrStale.
func Verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case !ok:
		case k == "t":
			ts = v
		case k == "v1":
			if b, err := hex.DecodeString(v); err == nil && len(b) == sha256.Size {
				sigs = append(sigs, b)
			}
		}
	}
	at, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrNoSignature
	}
	want := mac(secret, ts, body)
	matched := false
	for _, s := range sigs {
		matched = hmac.Equal(s, want) || matched
	}
	if !matched {
		return ErrBadSignature
	}
	if d := now.Sub(time.Unix(at, 0)); d > tolerance || d < -tolerance {
		return ErrStale
	}
	return nil
}

// Timeout bounds one delivery: a receiver slower than this failed it.
const Timeout = 10 * time.Second

// Sink posts events to one receiver's URL, signed with Secret.
type Sink struct {
	URL    string
	Secret []byte
	Client *http.Client // nil: one with Timeout
	Now    func() time.Time
}

// New returns a Sink for the receiver at rawURL (http or https, no user or password in it: a
// sink's name, which is its URL, is shown to operators).
func New(rawURL string, secret []byte) (*Sink, error) {
	u, err := url.Parse(rawURL)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
		return nil, fmt.Errorf("%w: webhook URL %q: want http(s)://host/path", sale.ErrInvalid, rawURL)
	case u.User != nil:
		return nil, fmt.Errorf("%w: webhook URL %q: no user or password in it; the signature authenticates", sale.ErrInvalid, u.Redacted())
	case len(rawURL) > 240:
		return nil, fmt.Errorf("%w: webhook URL of %d bytes: at most 240", sale.ErrInvalid, len(rawURL))
	case len(secret) < 16:
		return nil, fmt.Errorf("%w: the webhook secret must be at least 16 bytes", sale.ErrInvalid)
	}
	return &Sink{URL: rawURL, Secret: secret, Client: &http.Client{Timeout: Timeout}, Now: time.Now}, nil
}

// Name is the sink's name in the outbox: its URL.
func (s *Sink) Name() string { return s.URL }

// Deliver posts e. Any 2xx answer is a delivery; anything else, or no answer, is an error.
func (s *Sink) Deliver(ctx context.Context, e sale.Event) error {
	body, err := relay.Body(e)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "seckill-webhook/1")
	req.Header.Set("Seckill-Event-Id", e.ID)
	req.Header.Set(SignatureHeader, Sign(s.Secret, s.Now(), body))
	resp, err := s.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s answered %s: %s", s.URL, resp.Status, bytes.TrimSpace(snippet))
	}
	return nil
}
