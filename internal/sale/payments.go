package sale

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// PaymentState is where a payment through the provider stands.
type PaymentState string

// The states of a payment. Every payment the provider took money for ends kept (succeeded: its
// order is paid by it) or given back (refund_pending, then refunded): never both, never neither.
const (
	PaymentStarted       PaymentState = "started"        // the buyer was sent to the provider; no word from it yet
	PaymentSucceeded     PaymentState = "succeeded"      // the provider took the money and the order is paid by it
	PaymentFailed        PaymentState = "failed"         // the provider took nothing; the buyer may start again
	PaymentRefundPending PaymentState = "refund_pending" // the money came for an order that cannot keep it
	PaymentRefunded      PaymentState = "refunded"       // the money went back
)

// Payment is one attempt to pay an order through the payment provider. Its ID is ours: the
// provider is given it when the buyer is sent to pay, and names it in its callbacks.
//
// A payment is also what records money a signed notice says was taken under an ID we never
// issued: its OrderToken is then the order the notice named (which may be none of ours, and
// ActivityID and UserID empty), its AmountCents 0 (we asked for nothing), its RefundReason
// RefundUnknownPayment.
type Payment struct {
	ID          string
	OrderToken  string
	ActivityID  string
	UserID      string
	AmountCents int64 // what the buyer was sent to pay: the order's amount
	State       PaymentState
	CreatedAt   time.Time
	UpdatedAt   time.Time
	// ReceivedCents is what the provider says it took: 0 until a succeeded notice, then that
	// notice's amount, which is what a refund gives back.
	ReceivedCents int64
	// RefundReason says why the money is owed back (refund_pending, refunded); "" otherwise.
	RefundReason RefundReason
	// Provider names the provider the payment was started with: the one whose notices settle
	// it and whose refund gives its money back. ProviderRef is the provider's own name for it,
	// from its notice of the money (what its refund call names); "" until then.
	Provider, ProviderRef string
}

// RefundReason is why money that came is owed back.
type RefundReason string

// The reasons money is owed back. Each is a signed notice of money taken that no order can keep.
const (
	RefundOrderClosed    RefundReason = "order_closed"    // the order was cancelled (or refunded) before the money came
	RefundPaidTwice      RefundReason = "paid_twice"      // the order was paid by another of its payments
	RefundAmountMismatch RefundReason = "amount_mismatch" // the provider took another amount than the payment's
	RefundOrderMismatch  RefundReason = "order_mismatch"  // the notice named another order than the payment's
	RefundUnknownPayment RefundReason = "unknown_payment" // a payment id we never issued
)

// PaymentOutcome is what the provider says of a payment.
type PaymentOutcome string

// The outcomes a provider reports.
const (
	OutcomeSucceeded PaymentOutcome = "succeeded" // the money was taken
	OutcomeFailed    PaymentOutcome = "failed"    // nothing was taken
	OutcomeRefunded  PaymentOutcome = "refunded"  // the money asked back (refund_pending) was given back
)

// PaymentNotice is the provider's word on a payment, from its signed callback (or, for a
// refund, from an operator who made it by hand).
type PaymentNotice struct {
	PaymentID   string
	OrderToken  string
	AmountCents int64
	Outcome     PaymentOutcome
	// Provider is whose notice it is: money taken under a payment id we never issued is
	// recorded as that provider's, to be given back through it. ProviderRef is the provider's
	// own name for the payment, recorded with the money (a repeat of the notice changes nothing).
	Provider, ProviderRef string
}

// Settlement is what a notice left: the payment and its order as they stand, and whether this
// notice changed them (false: a duplicate, which changes nothing).
type Settlement struct {
	Payment Payment
	Order   Order
	Changed bool
}

// PaymentFilter selects payments to list: in State and of OrderToken when set, at most Limit,
// the newest first.
type PaymentFilter struct {
	State      PaymentState
	OrderToken string
	Limit      int
}

// PaymentStore keeps the payments. Settle is the one place a payment and its order change
// together, in the database's transaction with the order's event.
type PaymentStore interface {
	// StartPayment starts payment id with provider, at now, for the CREATED order of token whose
	// payment window is open, or returns the payment already started with provider for it and
	// not settled (a second click). One started with another provider is failed first: the
	// buyer chose another way to pay (should its provider take the money all the same, Settle
	// pays the order by it or owes it back). Errors: ErrNotFound, ErrInvalidState (not CREATED,
	// or the window has closed).
	StartPayment(ctx context.Context, token, id, provider string, now time.Time) (Payment, error)

	// Settle applies n at now. A succeeded notice is money taken: it always ends recorded, kept
	// or owed back, never refused for what it names.
	//   - succeeded, of a started or failed payment (a failure is not final: the provider may
	//     take the money on a retry), naming its order and amount: a CREATED order becomes PAID
	//     by the payment (whether or not its window has closed: the unit is still held); a
	//     CANCELLED order becomes REFUND_PENDING, its unit left on sale; an order paid by another
	//     payment stays as it is.
	//   - succeeded, of a started or failed payment, naming another amount or another order: no
	//     order is paid by it; a CANCELLED order of the payment becomes REFUND_PENDING, any other
	//     stays as it is (a CREATED one may still be paid by another payment).
	//   - succeeded, of a payment id never issued: a payment is recorded under that id for the
	//     order the notice names (or for no order, when it names none of ours: Settlement.Order
	//     is then the zero Order), owed back; a CANCELLED order becomes REFUND_PENDING.
	//   In all but the kept case the payment is refund_pending (RefundReason says why) and, when
	//   it is of an order of ours, an order.refund_requested event asks for the money back.
	//   - failed: a started payment is failed; the order is left as it is.
	//   - refunded: a refund_pending payment is refunded, and its order REFUNDED once none of
	//     its payments waits for a refund.
	// Once the money of a payment came, a later notice of it is matched by its amount (that
	// received), not by the order it names. A notice that repeats what the payment came to
	// changes nothing. Errors: ErrNotFound (a failure or a refund of no such payment), ErrInvalid
	// (a failure naming another order), ErrAmountMismatch (a failure of another amount than the
	// payment's, a refund of another than was received), ErrInvalidState (n contradicts the
	// payment: a failure after the money came, a refund of money kept, a second amount taken).
	Settle(ctx context.Context, n PaymentNotice, now time.Time) (Settlement, error)

	// Payment returns payment id. Errors: ErrNotFound.
	Payment(ctx context.Context, id string) (Payment, error)

	// Payments lists payments, newest first.
	Payments(ctx context.Context, f PaymentFilter) ([]Payment, error)
}

// ErrAmountMismatch says a notice of a failure or a refund names an amount other than the
// payment's (asked for, or received). Nothing changes. (A notice of money taken of another
// amount is not refused: the money is owed back.)
var ErrAmountMismatch = errors.New("the amount is not the payment's")

// Checkout is what a provider is told of a payment a buyer is sent to pay.
type Checkout struct {
	Payment Payment
	// ReturnURL is where the provider sends the buyer back: the activity's page, or the shop's.
	ReturnURL string
	// Subject is what is bought: the activity's name; Currency what its amount is in (the
	// activity's: "" is the shop's own, the provider's default).
	Subject, Currency string
	// Expire is when the order's payment window closes: the provider is asked to take no money
	// after it (a payment that comes later all the same is owed back).
	Expire time.Time
	// Mobile says the buyer is on a phone's browser (Alipay's wap.pay, WeChat Pay's H5), not a
	// desktop's (page.pay, a Native QR code). ClientIP is the buyer's address, which some
	// providers want with a phone's payment.
	Mobile   bool
	ClientIP string
}

// PaymentProvider is a payment provider the buyers pay at: the port its adapter implements
// (internal/stripepay, internal/alipay, internal/wechatpay, internal/signature). Its notices of
// money taken reach Payments.Settle through the HTTP layer, which reads each provider's format.
type PaymentProvider interface {
	// Name is the provider's name as the settings and the API spell it (stripe, alipay,
	// wechatpay, signed): the Provider of its payments.
	Name() string
	// Takes says the provider takes payments in currency (ISO 4217, lower case; "": the
	// shop's own, which every provider takes as its default).
	Takes(currency string) bool
	// PayURL returns where the buyer pays c.Payment: the provider's page, or what its app scans.
	// Asked again for the same payment (a second click), it returns the same payment's page:
	// the provider takes its money at most once (our payment id is its merchant order number).
	PayURL(ctx context.Context, c Checkout) (string, error)
	// Refund asks the provider to give back the money p received, as the refund refundID (the
	// provider's idempotency key: asked again, it refunds once). done says the provider gave it
	// back; false, that it took the refund and will say when it is done (its notice, or the
	// answer to the same refund asked again). ErrNoRefunds: the provider makes none on request;
	// an operator does (POST /api/admin/payments/{id}/refunded).
	Refund(ctx context.Context, p Payment, refundID string) (done bool, err error)
}

// ErrNoRefunds says a provider gives money back only when an operator does it by hand.
var ErrNoRefunds = errors.New("the provider makes no refunds on request")

// RefundID names the refund of payment id: a payment is refunded at most once, of all it received.
func RefundID(paymentID string) string { return "rf_" + paymentID }

// Payments are the payments of orders through providers: a feature of its own, built on a node
// that has one (without, the pay call pays: Service.Pay). It reads the orders through the core
// service, keeps the payments in its store, and sends the buyers to the providers.
type Payments struct {
	core      *Service
	store     PaymentStore
	returnTo  func(activityID string) string
	providers []PaymentProvider
}

// NewPayments returns the payments of core's orders, kept by store, through providers (at
// least one; the first is the buyers' when they name none), which send the buyers back to
// returnTo's page of the activity (nil: none).
func NewPayments(core *Service, store PaymentStore, returnTo func(activityID string) string, providers ...PaymentProvider) *Payments {
	return &Payments{core: core, store: store, returnTo: returnTo, providers: providers}
}

// Providers are the names of the providers the buyers may pay at, the default first.
func (s *Payments) Providers() []string {
	names := make([]string, len(s.providers))
	for i, p := range s.providers {
		names[i] = p.Name()
	}
	return names
}

// provider is the provider called name ("": the only one). Errors: ErrInvalid.
func (s *Payments) provider(name string) (PaymentProvider, error) {
	if name == "" && len(s.providers) == 1 {
		return s.providers[0], nil
	}
	for _, p := range s.providers {
		if p.Name() == name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("%w: provider must be one of %s", ErrInvalid, strings.Join(s.Providers(), ", "))
}

// Start starts paying userID's order ref through the provider c names (c.Payment.Provider; ""
// with one provider: that one): the buyer pays at the returned URL, and the order becomes PAID
// when the provider's notice says so (Settle). Asking again before the provider answers returns
// the same payment; asking with another provider starts another and closes the first. Errors:
// ErrInvalid (no such provider, or one that does not take the activity's currency),
// ErrNotFound, ErrInvalidState (the order is not awaiting payment, its window has closed, or it
// is still being created), ErrBusy (the store, or the provider, which may be asked again).
func (s *Payments) Start(ctx context.Context, userID, ref string, c Checkout) (Payment, string, error) {
	pr, err := s.provider(c.Payment.Provider)
	if err != nil {
		return Payment{}, "", err
	}
	o, err := s.core.placed(ctx, userID, ref)
	if err != nil {
		return Payment{}, "", err
	}
	a, err := s.core.Activity(ctx, o.ActivityID)
	if err != nil {
		return Payment{}, "", err
	}
	if !pr.Takes(a.Currency) {
		return Payment{}, "", fmt.Errorf("%w: %s does not take %s", ErrInvalid, pr.Name(), a.Currency)
	}
	p, err := s.store.StartPayment(ctx, o.Token, NewToken("pay_"), pr.Name(), s.core.now())
	if err != nil {
		return Payment{}, "", err
	}
	c.Subject, c.Currency = a.Name, a.Currency
	c.Payment, c.Expire = p, o.ExpiresAt
	if s.returnTo != nil {
		c.ReturnURL = s.returnTo(o.ActivityID)
	}
	u, err := pr.PayURL(ctx, c)
	if err != nil {
		if !errors.Is(err, ErrBusy) {
			err = Busy(err, "start payment %s at %s", p.ID, pr.Name())
		}
		return p, "", err
	}
	return p, u, nil
}

// Refund asks payment id's provider to give back the money the payment is owed back: the
// refund loop's one step (a relay sink of the order.refund_requested events, on a worker node).
// A payment no longer waiting for its refund is done with. When the provider says the money
// went back, the payment is settled refunded as its notice would; when it took the refund and
// will say later, ErrRefundUnderway (the loop asks again, under the same refund id, until it
// says done or its notice came). Errors: ErrNoRefunds (the provider's refunds are an
// operator's), ErrInvalid (no provider of that name on this node), ErrNotFound, ErrBusy, or the
// provider's own.
func (s *Payments) Refund(ctx context.Context, id string) error {
	p, err := s.store.Payment(ctx, id)
	if err != nil {
		return err
	}
	if p.State != PaymentRefundPending {
		return nil
	}
	pr, err := s.provider(p.Provider)
	if err != nil {
		return fmt.Errorf("refund payment %s: %w", id, err)
	}
	done, err := pr.Refund(ctx, p, RefundID(p.ID))
	if err != nil {
		return err
	}
	if !done {
		return ErrRefundUnderway
	}
	_, err = s.Settle(ctx, PaymentNotice{PaymentID: p.ID, OrderToken: p.OrderToken, AmountCents: p.ReceivedCents,
		Outcome: OutcomeRefunded, Provider: p.Provider, ProviderRef: p.ProviderRef})
	return err
}

// ErrRefundUnderway says the provider took a refund and has not yet given the money back.
var ErrRefundUnderway = errors.New("the refund is underway at the provider")

// Settle applies the provider's (or an operator's) word n on a payment; see PaymentStore.Settle.
// It is the one check of a notice: its outcome first (what a callback's status is refused for
// before anything else it says), then its ids and amount. A notice without an order token is of
// its payment's order. Errors: ErrInvalid, ErrNotFound,
// ErrAmountMismatch, ErrInvalidState, ErrBusy.
func (s *Payments) Settle(ctx context.Context, n PaymentNotice) (Settlement, error) {
	switch {
	case n.Outcome != OutcomeSucceeded && n.Outcome != OutcomeFailed && n.Outcome != OutcomeRefunded:
		return Settlement{}, fmt.Errorf("%w: status must be %s, %s or %s", ErrInvalid, OutcomeSucceeded, OutcomeFailed, OutcomeRefunded)
	case !ValidID(n.PaymentID) || n.OrderToken != "" && !ValidID(n.OrderToken):
		return Settlement{}, badID("payment_id and order_token")
	case n.AmountCents < 0:
		return Settlement{}, fmt.Errorf("%w: amount_cents must not be negative", ErrInvalid)
	case n.Provider == "":
		return Settlement{}, fmt.Errorf("%w: a notice names its provider", ErrInvalid)
	}
	// Not on the request's context: a provider that hangs up has still told us.
	ctx = context.WithoutCancel(ctx)
	if n.OrderToken == "" {
		// A notice that names no order (a provider's refund notice carries only its payment)
		// is of its payment's order; money taken under an id we never issued is then of none.
		switch p, err := s.store.Payment(ctx, n.PaymentID); {
		case err == nil:
			n.OrderToken = p.OrderToken
		case !errors.Is(err, ErrNotFound):
			return Settlement{}, err
		}
	}
	st, err := s.store.Settle(ctx, n, s.core.now())
	if err != nil || !st.Changed {
		return st, err
	}
	switch st.Payment.State {
	case PaymentSucceeded:
		s.core.event("paid", 1)
	case PaymentFailed:
		s.core.event("payment_failed", 1)
	case PaymentRefundPending:
		s.core.event("refund_requested", 1)
	case PaymentRefunded:
		s.core.event("refunded", 1)
	}
	return st, nil
}

// Payment returns payment id. Errors: ErrNotFound, ErrBusy.
func (s *Payments) Payment(ctx context.Context, id string) (Payment, error) {
	if !ValidID(id) {
		return Payment{}, fmt.Errorf("payment %q: %w", id, ErrNotFound)
	}
	return s.store.Payment(ctx, id)
}

// List lists payments, newest first (f.Limit 1 to MaxPage). Errors: ErrInvalid, ErrBusy.
func (s *Payments) List(ctx context.Context, f PaymentFilter) ([]Payment, error) {
	switch f.State {
	case "", PaymentStarted, PaymentSucceeded, PaymentFailed, PaymentRefundPending, PaymentRefunded:
	default:
		return nil, fmt.Errorf("%w: state must be started, succeeded, failed, refund_pending or refunded", ErrInvalid)
	}
	if err := checkPage(f.Limit, 0, ""); err != nil {
		return nil, err
	}
	if f.OrderToken != "" && !ValidID(f.OrderToken) {
		return nil, badID("order_token")
	}
	return s.store.Payments(ctx, f)
}
