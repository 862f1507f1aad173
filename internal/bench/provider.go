package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
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
	spec   ProviderSpec
	srv    *http.Server
	base   string
	client *http.Client
	nodes  func() []string // the base URLs of the nodes the notices go to, as they are now
	proto  protocol        // the provider's own side: its settings, its pages, its notices

	mu       sync.Mutex
	rng      *rand.Rand
	payments map[string]*payment // by order token
	events   map[string][]string // order token -> event types, each event once, as they arrived
	ids      map[string]bool     // the event ids received
	hooks    int                 // posts received
	unsigned int                 // posts whose signature failed
	pending  sync.WaitGroup      // callbacks still to make
	// lateUntil, when set, is the last moment a payment may be drawn late (SetLateUntil).
	lateUntil time.Time
	errs      []string
}

// ProviderSpec says how the simulated provider behaves. The shares are of the payments.
type ProviderSpec struct {
	// Kind is the provider the server is configured with and the buyers pay at: signed (the
	// generic signed callback, the default), stripe (stripe-mock for its API), alipay or
	// wechatpay (fakes of their APIs in this process, internal/paytest). Each sends its own
	// notices, signed its own way; the last three the server refunds through by itself.
	Kind                      string
	PaymentSecret, HookSecret string
	Late, Dup, Forged         float64
	// Window is the activity's payment window: a payment on time calls back within its first
	// third, a late one after it (and after the sweeper has closed it).
	Window time.Duration
	Seed   uint64
	// Dir holds what the provider writes for the servers: its keys, stripe-mock's files.
	Dir string
	// StripeMock starts stripe-mock with its files in dir, for --provider stripe: its API's
	// URL, and how to stop it (a lab server: nil in a release build, which starts none).
	StripeMock func(dir string) (url string, stop func(), err error)
}

// payment is one payment the provider took, and what became of its notices.
type payment struct {
	id, token string
	amount    int64
	late, dup bool
	forged    bool
	answers   []string  // the server's answers to the real notices, every attempt's
	refused   int       // real notices never taken, however many times sent
	forgedOK  bool      // a forged notice was taken
	taken     time.Time // when the server first took a real notice of it
}

// Validate reports a spec that cannot run.
func (s ProviderSpec) Validate() error {
	for name, v := range map[string]float64{"--late": s.Late, "--dup-callbacks": s.Dup, "--forged": s.Forged} {
		if v < 0 || v > 1 {
			return fmt.Errorf("%s %g: want a share between 0 and 1", name, v)
		}
	}
	switch {
	case !slices.Contains(ProviderKinds, s.Kind):
		return fmt.Errorf("--provider %q: want one of %s", s.Kind, strings.Join(ProviderKinds, ", "))
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
	if p.proto, err = openProtocol(p); err != nil {
		ln.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /checkout", p.checkout)
	mux.HandleFunc("POST /hook", p.hook)
	p.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go p.srv.Serve(ln)
	return p, nil
}

// Env is the servers' settings that make them take payments at this provider and post their
// events to its receiver.
func (p *Provider) Env() []string {
	return append(p.proto.env(), "SECKILL_WEBHOOK_SECRET="+p.spec.HookSecret, "SECKILL_WEBHOOK_URL="+p.HookURL())
}

// CheckoutURL is the provider's page (SECKILL_PAYMENT_URL); HookURL the shop's receiver
// (SECKILL_WEBHOOK_URL).
func (p *Provider) CheckoutURL() string { return p.base + "/checkout" }

// HookURL is the webhook receiver's URL.
func (p *Provider) HookURL() string { return p.base + "/hook" }

// CallBack names the nodes the provider sends its notices to, by their base URLs: each attempt
// goes to the next, as a load balancer behind the notify URL would send it.
func (p *Provider) CallBack(bases ...string) { p.CallBackTo(func() []string { return bases }) }

// CallBackTo is CallBack with the nodes as nodes says at each send: a node restarted on another
// port (the nemesis's kill) is called where it listens now.
func (p *Provider) CallBackTo(nodes func() []string) { p.nodes = nodes }

// Close stops serving, and the provider's API.
func (p *Provider) Close() error {
	p.proto.close()
	return p.srv.Close()
}

// Pay is a buyer paying at the provider the server sent them to: the payment the pay call
// started, and its page (pay_url).
func (p *Provider) Pay(ctx context.Context, pay *wire.PaymentResponse) error {
	if p.spec.Kind != signature.ProviderName {
		if pay.Provider != p.spec.Kind {
			return fmt.Errorf("payment %s is at %q, not %s", pay.PaymentID, pay.Provider, p.spec.Kind)
		}
		if err := p.proto.take(ctx, pay); err != nil {
			return err
		}
		return p.schedule(&payment{id: pay.PaymentID, token: pay.OrderToken, amount: pay.AmountCents})
	}
	payURL := pay.PayURL
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
	if err := p.schedule(&payment{id: q.Get("payment_id"), token: q.Get("order_token"), amount: amount}); err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// schedule takes pm's money and schedules its notices: on time (within the window's first
// third) or late (after the window, and after the sweeper has closed it), twice or once, with a
// forged one first or not, as the spec's shares draw.
func (p *Provider) schedule(pm *payment) error {
	p.mu.Lock()
	pm.late, pm.dup, pm.forged = p.rng.Float64() < p.spec.Late, p.rng.Float64() < p.spec.Dup, p.rng.Float64() < p.spec.Forged
	pm.late = pm.late && (p.lateUntil.IsZero() || time.Now().Before(p.lateUntil))
	delay := time.Duration(p.rng.Int64N(int64(p.spec.Window / 3)))
	if pm.late {
		delay = p.spec.Window + 1500*time.Millisecond + delay // the sweeper runs every second
	}
	if _, again := p.payments[pm.token]; again {
		p.mu.Unlock()
		return errors.New("paid already")
	}
	p.payments[pm.token] = pm
	p.pending.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.pending.Done()
		time.Sleep(delay)
		p.call(pm)
	}()
	return nil
}

// call sends a payment's notices: a forged one first if it is to be, then the real one, twice
// if it is to be duplicated. A real notice the server does not take (no answer, a refusal, a node
// down) is sent again after a pause, as providers do, for up to noticeFor.
func (p *Provider) call(pm *payment) {
	if pm.forged {
		taken, _, err := p.post(p.proto.notice(pm, true), 0)
		p.mu.Lock()
		pm.forgedOK = err == nil && taken
		p.mu.Unlock()
	}
	for range 1 + btoi(pm.dup) {
		pause := noticeFirstPause
		until := time.Now().Add(noticeFor)
		for attempt := 0; ; attempt++ {
			taken, answer, err := p.post(p.proto.notice(pm, false), attempt)
			p.mu.Lock()
			if err != nil {
				answer = err.Error()
			}
			pm.answers = append(pm.answers, answer)
			if taken && pm.taken.IsZero() {
				pm.taken = time.Now()
			}
			last := taken || time.Now().Add(pause).After(until)
			if last && !taken {
				pm.refused++
				if err != nil {
					p.errs = append(p.errs, fmt.Sprintf("notice of %s: %v", pm.id, err))
				}
			}
			p.mu.Unlock()
			if last {
				break
			}
			time.Sleep(pause)
			pause = min(2*pause, noticeMaxPause)
		}
	}
}

// How a notice the server did not take is sent again: after 250 ms, then twice as long each
// time up to 4 s, for a minute. Real providers go on for a day or more (Alipay about 25 hours,
// WeChat Pay 24, Stripe 3 days); a minute outlasts any strike the nemesis holds, and the time a
// node's breakers take to close after it, even with strikes overlapping. (Eight sends in 17 s
// did not: two database outages 3.6 s apart, each followed by seconds of half-open breakers,
// refused every send of a late notice, Sentinel seed 2.)
const (
	noticeFor        = time.Minute
	noticeFirstPause = 250 * time.Millisecond
	noticeMaxPause   = 4 * time.Second
)

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// post sends one notice to the server, its attempt-th, and says whether the provider takes its
// answer (stops sending it), and what the answer was.
func (p *Provider) post(n notice, attempt int) (bool, string, error) {
	var bases []string
	if p.nodes != nil {
		bases = p.nodes()
	}
	if len(bases) == 0 {
		return false, "", errors.New("the provider was told of no node to call back")
	}
	node := attempt % len(bases)
	to := strings.TrimSuffix(bases[node], "/") + "/api/payments/" + p.proto.route()
	req, err := http.NewRequest(http.MethodPost, to, bytes.NewReader(n.body))
	if err != nil {
		return false, "", err
	}
	for k, v := range n.header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", n.contentType)
	resp, err := p.client.Do(req)
	if err != nil {
		return false, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	// The answer, for a report: when (UTC, to line up with the nodes' logs), from which node.
	answer := fmt.Sprintf("%s node %d: %d %s", time.Now().UTC().Format("15:04:05.000"), node, resp.StatusCode,
		strings.TrimSpace(string(body[:min(len(body), 200)])))
	return p.proto.taken(resp.StatusCode, body), answer, nil
}

// hook is the shop's webhook receiver: it checks the signature over the raw body, and keeps each
// order's event once, in the order of arrival per order (an activity's events are taken and
// left).
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
	if err := json.Unmarshal(body, &m); err != nil || m.ID == "" || (m.Order == nil) == (m.Activity == nil) {
		http.Error(w, "not an event", http.StatusBadRequest)
		return
	}
	if m.Order == nil { // an activity's event (a reservation sale's reminder): no order's
		w.WriteHeader(http.StatusNoContent)
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

// SetLateUntil makes the payments taken after t all on time. A late payment's order gives its
// unit back when its window closes; after t, that would be once the crowd is over, with nobody
// left to buy it.
func (p *Provider) SetLateUntil(t time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lateUntil = t
}

// Late reports the orders whose payment the provider calls back after the window.
func (p *Provider) Late() map[string]bool {
	return p.tokens(func(pm *payment) bool { return pm.late })
}

// tokens returns the orders of the payments taken that keep says.
func (p *Provider) tokens(keep func(*payment) bool) map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]bool{}
	for tok, pm := range p.payments {
		if keep(pm) {
			out[tok] = true
		}
	}
	return out
}

// Taken reports when the server first took a real notice of each order's payment.
func (p *Provider) Taken() map[string]time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]time.Time{}
	for tok, pm := range p.payments {
		if !pm.taken.IsZero() {
			out[tok] = pm.taken
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

// add counts o, another activity's report of the same provider and receiver, into r.
func (r *PaymentsReport) add(o PaymentsReport) {
	r.Provider = o.Provider
	r.Payments += o.Payments
	r.Late += o.Late
	r.Duplicated += o.Duplicated
	r.Forged += o.Forged
	r.Kept += o.Kept
	r.Refunded += o.Refunded
	r.RefundsMade += o.RefundsMade
	r.Callbacks += o.Callbacks
	r.Events, r.Posts, r.Unsigned, r.Errors = o.Events, o.Posts, o.Unsigned, o.Errors // the receiver's, whole
}

// PaymentsReport is what the simulated provider and receiver saw of a run.
type PaymentsReport struct {
	Provider   string `json:"provider"`   // signed, stripe, alipay or wechatpay
	Payments   int    `json:"payments"`   // taken at the provider
	Late       int    `json:"late"`       // notified after the window
	Duplicated int    `json:"duplicated"` // notified twice
	Forged     int    `json:"forged"`     // preceded by a forged notice (which must be refused)
	Kept       int    `json:"kept"`       // their order PAID
	Refunded   int    `json:"refunded"`   // their order REFUND_PENDING or REFUNDED: the unit was resold
	// RefundsMade are the refunds the server asked the provider for (stripe, alipay,
	// wechatpay: each refund of a late payment is the server's own).
	RefundsMade int `json:"refunds_made"`
	Events      int `json:"events"`    // distinct events received
	Posts       int `json:"posts"`     // webhook posts received (a retry or a redelivery counts again)
	Unsigned    int `json:"unsigned"`  // posts whose signature failed (a violation)
	Callbacks   int `json:"callbacks"` // real notices sent
	Errors      int `json:"errors"`    // notices that got no answer
}

// report sums up the payments, given each order's final status.
func (p *Provider) report(orders map[string]Order) (PaymentsReport, []paymentFact, map[string]int64) {
	refunds, refunding := p.proto.refunds()
	p.mu.Lock()
	defer p.mu.Unlock()
	r := PaymentsReport{Provider: p.spec.Kind, Events: len(p.ids), Posts: p.hooks, Unsigned: p.unsigned,
		Errors: len(p.errs)}
	var facts []paymentFact
	for _, pm := range p.payments {
		if _, ours := orders[pm.token]; !ours {
			// Another activity's payment (a nemesis runs several): its refund is not owed here.
			delete(refunds, sale.RefundID(pm.id))
			continue
		}
		r.Payments++
		r.Late += btoi(pm.late)
		r.Duplicated += btoi(pm.dup)
		r.Forged += btoi(pm.forged)
		r.Callbacks += len(pm.answers)
		status := orders[pm.token].Status
		switch status {
		case sale.StatusPaid:
			r.Kept++
		case sale.StatusRefundPending, sale.StatusRefunded:
			r.Refunded++
		}
		facts = append(facts, paymentFact{id: pm.id, token: pm.token, amount: pm.amount, status: status,
			answers: append([]string(nil), pm.answers...), refused: pm.refused, forgedOK: pm.forgedOK, refunding: refunding})
	}
	if !refunding {
		refunds = nil
	}
	r.RefundsMade = len(refunds)
	return r, facts, refunds
}

// paymentFact is one payment as the checker sees it.
type paymentFact struct {
	id, token string
	amount    int64
	status    sale.Status
	answers   []string // the server's answers to the real notices
	refused   int      // of which the provider was refused
	forgedOK  bool
	// refunding says the server refunds through the provider by itself: a payment owed back
	// must end REFUNDED, by one refund of the provider's.
	refunding bool
}
