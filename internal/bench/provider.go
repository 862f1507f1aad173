package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"seckill/internal/httpapi/wire"
	"seckill/internal/relay"
	"seckill/internal/sale"
	"seckill/internal/signature"
)

// Provider is what a shop's side of a sale looks like to the server, simulated on loopback for
// a run: a payment provider whose checkout page the buyers are sent to and which calls the
// server back after a random delay (some after the payment window has closed, some twice, some
// preceded by a forged copy), and the shop's webhook receiver, which checks every event's
// signature and records each order's events in the order they arrive.
type Provider struct {
	spec     ProviderSpec
	srv      *http.Server
	base     string
	client   *http.Client
	callback string // the server's callback URL

	mu       sync.Mutex
	rng      *rand.Rand
	payments map[string]*payment // by order token
	events   map[string][]string // order token -> event types, each event once, as they arrived
	ids      map[string]bool     // the event ids received
	hooks    int                 // posts received
	unsigned int                 // posts whose signature failed
	pending  sync.WaitGroup      // callbacks still to make
	errs     []string
}

// ProviderSpec says how the simulated provider behaves. The shares are of the payments.
type ProviderSpec struct {
	PaymentSecret, HookSecret string
	Late, Dup, Forged         float64
	// Window is the activity's payment window: a payment on time calls back within its first
	// third, a late one after it (and after the sweeper has closed it).
	Window time.Duration
	Seed   uint64
}

// payment is one payment the provider took, and what became of its callbacks.
type payment struct {
	id, token string
	amount    int64
	late, dup bool
	forged    bool
	statuses  []int       // the server's answers to the real callbacks
	order     sale.Status // the order's status in the server's answer to the first real callback
	forgedOK  bool        // a forged callback was taken
}

// Validate reports a spec that cannot run.
func (s ProviderSpec) Validate() error {
	for name, v := range map[string]float64{"--late": s.Late, "--dup-callbacks": s.Dup, "--forged": s.Forged} {
		if v < 0 || v > 1 {
			return fmt.Errorf("%s %g: want a share between 0 and 1", name, v)
		}
	}
	switch {
	case len(s.PaymentSecret) < 16 || len(s.HookSecret) < 16:
		return fmt.Errorf("the provider's secrets must be at least 16 bytes")
	case s.Window < time.Second:
		return fmt.Errorf("the provider needs the payment window (--pay-window, at least 1s)")
	}
	return nil
}

// StartProvider serves the provider and the receiver on a free loopback port.
func StartProvider(spec ProviderSpec) (*Provider, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("the simulated provider: %w", err)
	}
	p := &Provider{spec: spec, base: "http://" + ln.Addr().String(), client: &http.Client{Timeout: 10 * time.Second},
		rng: rand.New(rand.NewPCG(spec.Seed, 0x9a7e)), payments: map[string]*payment{}, events: map[string][]string{},
		ids: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /checkout", p.checkout)
	mux.HandleFunc("POST /hook", p.hook)
	p.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go p.srv.Serve(ln)
	return p, nil
}

// CheckoutURL is the provider's page (SECKILL_PAYMENT_URL); HookURL the shop's receiver
// (SECKILL_WEBHOOK_URL).
func (p *Provider) CheckoutURL() string { return p.base + "/checkout" }

// HookURL is the webhook receiver's URL.
func (p *Provider) HookURL() string { return p.base + "/hook" }

// CallBack names the server the provider calls back: its base URL.
func (p *Provider) CallBack(base string) {
	p.callback = strings.TrimSuffix(base, "/") + "/api/payments/callback"
}

// Close stops serving.
func (p *Provider) Close() error { return p.srv.Close() }

// Pay is a buyer paying at the page the server sent them to (pay_url).
func (p *Provider) Pay(ctx context.Context, payURL string) error {
	if !strings.HasPrefix(payURL, p.CheckoutURL()+"?") {
		return fmt.Errorf("pay_url %q is not the provider's checkout page", payURL)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, payURL, nil)
	if err != nil {
		return err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return fmt.Errorf("the checkout page answered %s: %s", resp.Status, b)
	}
	return nil
}

// checkout takes a payment and schedules its callbacks. Like a real provider's page it takes
// nothing unless the shop signed what the URL asks for (signature.VerifyCheckout): a buyer who
// edited the amount is refused (403, which fails the run's payment).
func (p *Provider) checkout(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if signature.VerifyCheckout([]byte(p.spec.PaymentSecret), q) != nil {
		http.Error(w, "the checkout URL is not as the shop signed it", http.StatusForbidden)
		return
	}
	amount, err := strconv.ParseInt(q.Get("amount_cents"), 10, 64)
	if err != nil || q.Get("payment_id") == "" || q.Get("order_token") == "" {
		http.Error(w, "not a payment", http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	pm := &payment{id: q.Get("payment_id"), token: q.Get("order_token"), amount: amount,
		late: p.rng.Float64() < p.spec.Late, dup: p.rng.Float64() < p.spec.Dup, forged: p.rng.Float64() < p.spec.Forged}
	delay := time.Duration(p.rng.Int64N(int64(p.spec.Window / 3)))
	if pm.late {
		delay = p.spec.Window + 1500*time.Millisecond + delay // the sweeper runs every second
	}
	if _, again := p.payments[pm.token]; again {
		p.mu.Unlock()
		http.Error(w, "paid already", http.StatusConflict)
		return
	}
	p.payments[pm.token] = pm
	p.pending.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.pending.Done()
		time.Sleep(delay)
		p.call(pm)
	}()
	w.WriteHeader(http.StatusOK)
}

// call makes a payment's callbacks: a forged one first if it is to be, then the real one, twice
// if it is to be duplicated.
func (p *Provider) call(pm *payment) {
	body, _ := json.Marshal(wire.CallbackRequest{OrderToken: pm.token, PaymentID: pm.id, AmountCents: &pm.amount, Status: sale.OutcomeSucceeded})
	if pm.forged {
		status, _, err := p.post(body, []byte("not the provider's secret at all"))
		p.mu.Lock()
		pm.forgedOK = err == nil && status != http.StatusUnauthorized
		p.mu.Unlock()
	}
	for i := range 1 + btoi(pm.dup) {
		status, order, err := p.post(body, []byte(p.spec.PaymentSecret))
		p.mu.Lock()
		if err != nil {
			p.errs = append(p.errs, fmt.Sprintf("callback of %s: %v", pm.id, err))
		}
		pm.statuses = append(pm.statuses, status)
		if i == 0 {
			pm.order = order
		}
		p.mu.Unlock()
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// post sends one callback signed with secret, and returns the status and the order's status.
func (p *Provider) post(body, secret []byte) (int, sale.Status, error) {
	req, err := http.NewRequest(http.MethodPost, p.callback, strings.NewReader(string(body)))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(signature.Header, signature.Sign(secret, time.Now(), body))
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var out wire.SettlementResponse
	json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&out)
	if out.Order == nil {
		return resp.StatusCode, "", nil
	}
	return resp.StatusCode, out.Order.Status, nil
}

// hook is the shop's webhook receiver: it checks the signature over the raw body, and keeps each
// event once, in the order of arrival per order.
func (p *Provider) hook(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		http.Error(w, "unread", http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hooks++
	if signature.Verify([]byte(p.spec.HookSecret), r.Header.Get(signature.Header), body, time.Now(), signature.Tolerance) != nil {
		p.unsigned++
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var m relay.Message
	if err := json.Unmarshal(body, &m); err != nil || m.ID == "" {
		http.Error(w, "not an event", http.StatusBadRequest)
		return
	}
	if !p.ids[m.ID] {
		p.ids[m.ID] = true
		p.events[m.Order.Token] = append(p.events[m.Order.Token], strings.TrimPrefix(m.Type, "order."))
	}
	w.WriteHeader(http.StatusNoContent)
}

// Wait returns once every callback scheduled has been made, or ctx ends.
func (p *Provider) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { p.pending.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the provider's callbacks: %w", ctx.Err())
	}
}

// Late reports the orders whose payment the provider calls back after the window.
func (p *Provider) Late() map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]bool{}
	for tok, pm := range p.payments {
		if pm.late {
			out[tok] = true
		}
	}
	return out
}

// Events returns what the receiver has of each order: its event types, in the order they came.
func (p *Provider) Events() map[string][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string][]string, len(p.events))
	for tok, evs := range p.events {
		out[tok] = append([]string(nil), evs...)
	}
	return out
}

// PaymentsReport is what the simulated provider and receiver saw of a run.
type PaymentsReport struct {
	Payments   int `json:"payments"`   // taken at the checkout page
	Late       int `json:"late"`       // called back after the window
	Duplicated int `json:"duplicated"` // called back twice
	Forged     int `json:"forged"`     // preceded by a forged callback (which must be refused)
	Kept       int `json:"kept"`       // their order PAID
	Refunded   int `json:"refunded"`   // their order REFUND_PENDING or REFUNDED: the unit was resold
	Events     int `json:"events"`     // distinct events received
	Posts      int `json:"posts"`      // webhook posts received (a retry or a redelivery counts again)
	Unsigned   int `json:"unsigned"`   // posts whose signature failed (a violation)
	Callbacks  int `json:"callbacks"`  // real callbacks made
	Errors     int `json:"errors"`     // callbacks that got no answer
}

// report sums up the payments, given each order's final status.
func (p *Provider) report(orders map[string]Order) (PaymentsReport, []paymentFact) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := PaymentsReport{Payments: len(p.payments), Events: len(p.ids), Posts: p.hooks, Unsigned: p.unsigned, Errors: len(p.errs)}
	var facts []paymentFact
	for _, pm := range p.payments {
		r.Late += btoi(pm.late)
		r.Duplicated += btoi(pm.dup)
		r.Forged += btoi(pm.forged)
		r.Callbacks += len(pm.statuses)
		status := orders[pm.token].Status
		switch status {
		case sale.StatusPaid:
			r.Kept++
		case sale.StatusRefundPending, sale.StatusRefunded:
			r.Refunded++
		}
		facts = append(facts, paymentFact{id: pm.id, token: pm.token, status: status, statuses: append([]int(nil), pm.statuses...),
			forgedOK: pm.forgedOK})
	}
	return r, facts
}

// paymentFact is one payment as the checker sees it.
type paymentFact struct {
	id, token string
	status    sale.Status
	statuses  []int
	forgedOK  bool
}
