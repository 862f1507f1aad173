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
