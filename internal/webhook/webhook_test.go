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
)

var secret = []byte("a webhook secret of some length")

func TestSignAndVerify(t *testing.T) {
	now := time.Unix(1_900_000_000, 0)
	body := []byte(`{"id":"g1.paid"}`)
	sig := Sign(secret, now, body)
	if !strings.HasPrefix(sig, "t=1900000000,v1=") || len(sig) != len("t=1900000000,v1=")+64 {
		t.Fatalf("signature %q", sig)
	}
	if err := Verify(secret, sig, body, now.Add(4*time.Minute), Tolerance); err != nil {
		t.Fatalf("a good signature: %v", err)
	}
	other := Sign([]byte("another secret, being rotated in"), now, body)
	rotated := sig + "," + strings.Split(other, ",")[1]
	if err := Verify(secret, rotated, body, now, Tolerance); err != nil {
		t.Fatalf("two v1 values, one matching: %v", err)
	}
	for _, tc := range []struct {
		name   string
		header string
		body   string
		now    time.Time
		want   error
	}{
		{"a changed body", sig, `{"id":"g1.refunded"}`, now, ErrBadSignature},
		{"another secret", other, string(body), now, ErrBadSignature},
		{"a timestamp changed", strings.Replace(sig, "t=1900000000", "t=1900000001", 1), string(body), now, ErrBadSignature},
		{"too old", sig, string(body), now.Add(Tolerance + time.Second), ErrStale},
		{"from the future", sig, string(body), now.Add(-Tolerance - time.Second), ErrStale},
		{"no header", "", string(body), now, ErrNoSignature},
		{"no timestamp", strings.Split(sig, ",")[1], string(body), now, ErrNoSignature},
		{"no v1", "t=1900000000", string(body), now, ErrNoSignature},
		{"a v1 not hex", "t=1900000000,v1=zz", string(body), now, ErrNoSignature},
		{"a short v1", "t=1900000000,v1=abcd", string(body), now, ErrNoSignature},
	} {
		if err := Verify(secret, tc.header, []byte(tc.body), tc.now, Tolerance); !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
	}
}

func FuzzVerify(f *testing.F) {
	now := time.Unix(1_900_000_000, 0)
	f.Add(Sign(secret, now, []byte("{}")), []byte("{}"))
	f.Add("t=1,v1=00", []byte(""))
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		err := Verify(secret, header, body, now, Tolerance)
		if err == nil && Sign(secret, now, body) != header && !strings.Contains(header, strings.Split(Sign(secret, now, body), ",")[1]) {
			// A header this package did not sign passed only if it carries the right MAC.
			t.Fatalf("Verify passed %q for %q", header, body)
		}
	})
}

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
		if err := Verify(secret, r.Header.Get(SignatureHeader), gotBody, at, Tolerance); err != nil {
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
