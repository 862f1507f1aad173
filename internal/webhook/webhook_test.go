package webhook

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"seckill/internal/sale"
	"seckill/internal/signature"
)

var secret = []byte("a webhook secret of some length")

func TestNew(t *testing.T) {
	for _, bad := range []string{"", "ftp://x/y", "http://", "http://user:pw@example.com/hook", "not a url", "http://x/" + strings.Repeat("a", 240)} {
		if _, err := New(bad, secret); !errors.Is(err, sale.ErrInvalid) {
			t.Errorf("New(%q): %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := New("https://example.com/hook", []byte("short")); !errors.Is(err, sale.ErrInvalid) {
		t.Errorf("a short secret: %v", err)
	}
	s, err := New("https://example.com/hook", secret)
	if err != nil || s.Name() != "https://example.com/hook" {
		t.Fatalf("New: %v, %v", s, err)
	}
}

// TestDeliver posts an event to a receiver on loopback that checks it as a shop would.
func TestDeliver(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	status := http.StatusNoContent
	var got http.Header
	var gotBody []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		gotBody, _ = io.ReadAll(r.Body)
		if err := signature.Verify(secret, r.Header.Get(signature.Header), gotBody, at, signature.Tolerance); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	s, err := New(srv.URL+"/hook", secret)
	if err != nil {
		t.Fatal(err)
	}
	s.Now = func() time.Time { return at }
	e := sale.Event{ID: "g1.paid", Type: sale.EventPaid, At: at, Order: sale.Order{Token: "g1", ID: 7, ActivityID: "a", UserID: "alice",
		AmountCents: 1999, Status: sale.StatusPaid}}
	if err := s.Deliver(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	want := `{"id":"g1.paid","type":"order.paid","created_at":"2030-01-02T03:04:05Z","order":{"order_token":"g1","order_id":7,"activity_id":"a","user":"alice","amount_cents":1999,"status":"PAID"}}`
	if string(gotBody) != want || got.Get("Content-Type") != "application/json" || got.Get("Seckill-Event-Id") != "g1.paid" {
		t.Fatalf("posted %s with %v\nwant %s", gotBody, got, want)
	}
	status = http.StatusInternalServerError
	if err := s.Deliver(context.Background(), e); err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("a 500: %v", err)
	}
	s.Secret = []byte("the wrong secret, as a receiver would see it")
	if err := s.Deliver(context.Background(), e); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a forged signature is refused by the receiver: %v", err)
	}
}
