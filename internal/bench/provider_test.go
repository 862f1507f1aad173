package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill/internal/httpapi/wire"
	"seckill/internal/signature"
)

// TestProviderTakesOnlyWhatTheShopSigned: the simulated provider's checkout page takes a payment
// whose URL the shop signed, and calls back for the amount it asked; a URL whose amount the buyer
// edited, or that is not signed, is refused and never called back.
func TestProviderTakesOnlyWhatTheShopSigned(t *testing.T) {
	spec := ProviderSpec{Kind: "signed", PaymentSecret: "the provider's payment secret", HookSecret: "the shop's webhook secret",
		Window: 3 * time.Second, Seed: 1}
	var mu sync.Mutex
	var bodies []string
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		fmt.Fprint(w, `{"order":{"status":"PAID"}}`)
	}))
	defer shop.Close()
	p, err := StartProvider(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.CallBack(shop.URL)

	checkout := func(id, token string, amount int64, edit func(q url.Values)) string {
		q := url.Values{"payment_id": {id}, "order_token": {token}, "amount_cents": {fmt.Sprint(amount)},
			signature.CheckoutParam: {signature.SignCheckout([]byte(spec.PaymentSecret), id, token, amount)}}
		if edit != nil {
			edit(q)
		}
		return p.CheckoutURL() + "?" + q.Encode()
	}
	ctx := context.Background()
	if err := p.Pay(ctx, &wire.PaymentResponse{PayURL: checkout("pay_1", "g1", 990, nil)}); err != nil {
		t.Fatalf("a signed checkout: %v", err)
	}
	for name, u := range map[string]string{
		"the amount edited": checkout("pay_2", "g2", 990, func(q url.Values) { q.Set("amount_cents", "1090") }),
		"not signed":        checkout("pay_3", "g3", 990, func(q url.Values) { q.Del(signature.CheckoutParam) }),
		"another secret": checkout("pay_4", "g4", 990, func(q url.Values) {
			q.Set(signature.CheckoutParam, signature.SignCheckout([]byte("not the shop's secret"), "pay_4", "g4", 990))
		}),
	} {
		if err := p.Pay(ctx, &wire.PaymentResponse{PayURL: u}); err == nil || !strings.Contains(err.Error(), "403") {
			t.Errorf("%s: %v, want the page's refusal (403)", name, err)
		}
	}
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := p.Wait(wait); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := `{"order_token":"g1","payment_id":"pay_1","amount_cents":990,"status":"succeeded"}`
	for _, b := range bodies {
		if b != want {
			t.Errorf("a callback %s; want only %s", b, want)
		}
	}
	if len(bodies) == 0 {
		t.Errorf("no callback for the signed payment")
	}
}

// TestProviderSendsANoticeAgainUntilANodeTakesIt: as a real provider does, the simulated one
// sends a notice that was not taken (a node down, a 503 while its database is away) again, each
// time to the next node it was told of, until one takes it; the payment then counts as answered,
// with when it was taken, and not as refused.
func TestProviderSendsANoticeAgainUntilANodeTakesIt(t *testing.T) {
	spec := ProviderSpec{Kind: "signed", PaymentSecret: "the provider's payment secret", HookSecret: "the shop's webhook secret",
		Window: 3 * time.Second, Seed: 1}
	var mu sync.Mutex
	var hits []string
	refusals := 3
	node := func(name string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			hits = append(hits, name)
			if refusals > 0 {
				refusals--
				http.Error(w, `{"error":{"code":"BUSY"}}`, http.StatusServiceUnavailable)
				return
			}
			fmt.Fprint(w, `{"order":{"status":"PAID"}}`)
		}))
	}
	a, b := node("a"), node("b")
	defer a.Close()
	defer b.Close()
	p, err := StartProvider(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// The nodes as they are at each send: the first send finds a node that is gone (restarted
	// elsewhere), the next ones the two that listen.
	sends := 0
	p.CallBackTo(func() []string {
		if sends++; sends == 1 {
			return []string{"http://127.0.0.1:1"}
		}
		return []string{a.URL, b.URL}
	})
	q := url.Values{"payment_id": {"pay_1"}, "order_token": {"g1"}, "amount_cents": {"990"},
		signature.CheckoutParam: {signature.SignCheckout([]byte(spec.PaymentSecret), "pay_1", "g1", 990)}}
	before := time.Now()
	ctx := context.Background()
	if err := p.Pay(ctx, &wire.PaymentResponse{PayURL: p.CheckoutURL() + "?" + q.Encode()}); err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := p.Wait(wait); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(hits) < 4 || hits[0] == hits[1] || hits[1] == hits[2] {
		t.Fatalf("the notice went to %v; want it sent again after each of the 3 refusals, to the next node each time", hits)
	}
	if sends != len(hits)+1 {
		t.Fatalf("%d sends asked where the nodes are, for 1 refused connection and %d answers", sends, len(hits))
	}
	p.mu.Lock()
	pm := p.payments["g1"]
	refused, answers := pm.refused, len(pm.answers)
	p.mu.Unlock()
	if refused != 0 || answers != len(hits)+1 {
		t.Fatalf("refused %d, %d answers of %d sends: want none refused in the end, every answer kept", refused, answers, len(hits)+1)
	}
	if at, ok := p.Taken()["g1"]; !ok || at.Before(before) {
		t.Fatalf("taken at %v (%v), want the time of the accepted send", at, ok)
	}
}
