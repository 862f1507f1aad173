// Package webhook delivers order events to HTTP receivers: one JSON POST an event, signed with
// the scheme of package signature.
package webhook

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"seckill/internal/relay"
	"seckill/internal/sale"
	"seckill/internal/signature"
)

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
	req.Header.Set(signature.Header, signature.Sign(s.Secret, s.Now(), body))
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
