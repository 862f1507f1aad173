package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"seckill/internal/httpapi/wire"
	"seckill/internal/sale"
	"seckill/internal/signature"
)

// Provider is the payment provider the buyers pay at. With one, a buyer's pay call starts a
// payment and sends the buyer to CheckoutURL; the order is paid only by the provider's callback,
// signed with Secret (package signature).
type Provider struct {
	Secret []byte
	// CheckoutURL is the provider's page a buyer pays at: the pay call answers it with the
	// payment's payment_id, order_token and amount_cents added to its query, and sig, their
	// signature with Secret (signature.SignCheckout), which the provider checks.
	CheckoutURL string
	// Now is the clock a callback's signature is checked on (the provider's is the real time,
	// whatever clock the sale runs on); nil: time.Now.
	Now func() time.Time
}

// signed names the provider this node speaks to: the signed callback (Provider).
const signed = "signed"

func (s *Server) paymentOf(p sale.Payment) *wire.PaymentResponse {
	r := &wire.PaymentResponse{PaymentID: p.ID, Provider: p.Provider, OrderToken: p.OrderToken, AmountCents: p.AmountCents, State: p.State,
		ReceivedCents: p.ReceivedCents, RefundReason: p.RefundReason, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
	if p.State == sale.PaymentStarted && s.provider != nil {
		r.PayURL = s.provider.checkout(p)
	}
	return r
}

// checkout is where the buyer pays p: the provider's page, told which payment it is and what
// to take, signed, so that a buyer who edits the URL is refused there. (Should a provider take
// another amount all the same, its notice is owed back: see sale.PaymentStore.Settle.)
func (pr *Provider) checkout(p sale.Payment) string {
	u, err := url.Parse(pr.CheckoutURL)
	if err != nil { // checked when the node started
		return pr.CheckoutURL
	}
	q := u.Query()
	q.Set("payment_id", p.ID)
	q.Set("order_token", p.OrderToken)
	q.Set("amount_cents", strconv.FormatInt(p.AmountCents, 10))
	q.Set(signature.CheckoutParam, signature.SignCheckout(pr.Secret, p.ID, p.OrderToken, p.AmountCents))
	u.RawQuery = q.Encode()
	return u.String()
}

// startPayment is the buyer's pay call with a provider: 202 and the order, still CREATED, with
// its payment and where to pay it.
func (s *Server) startPayment(w http.ResponseWriter, r *http.Request, user string) {
	if err := decodeEmpty(w, r, &struct{}{}); err != nil {
		s.writeError(w, r, err)
		return
	}
	p, err := s.payments.Start(r.Context(), user, r.PathValue("ref"), signed)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	o, err := s.svc.Order(r.Context(), user, p.OrderToken)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	resp := orderResponse(o)
	resp.Payment = s.paymentOf(p)
	writeJSON(w, http.StatusAccepted, resp)
}

// paymentCallback takes the provider's signed word on a payment. The signature is checked over
// the raw body before it is parsed; a forged, altered or replayed body changes nothing. A signed
// notice of money taken is answered 200 whatever it names: kept, or recorded as owed back (see
// sale.PaymentStore.Settle), so that the provider stops sending it.
func (s *Server) paymentCallback(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body) // bounded by ServeHTTP's MaxBytesReader
	if err != nil {
		s.writeError(w, r, decodeError(err))
		return
	}
	if err := signature.Verify(s.provider.Secret, r.Header.Get(signature.Header), body, s.provider.Now(), signature.Tolerance); err != nil {
		s.writeError(w, r, err)
		return
	}
	var req wire.CallbackRequest
	if err := decodeObject(body, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.AmountCents == nil {
		s.writeError(w, r, fmt.Errorf("%w: amount_cents is required", sale.ErrInvalid))
		return
	}
	// The service checks the notice (its status first).
	s.settle(w, r, sale.PaymentNotice{Provider: signed, PaymentID: req.PaymentID, OrderToken: req.OrderToken, AmountCents: *req.AmountCents,
		Outcome: req.Status})
}

func (s *Server) settle(w http.ResponseWriter, r *http.Request, n sale.PaymentNotice) {
	st, err := s.payments.Settle(r.Context(), n)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	resp := wire.SettlementResponse{Payment: s.paymentOf(st.Payment), Changed: st.Changed}
	if st.Order.Token != "" {
		o := orderResponse(st.Order)
		resp.Order = &o
	}
	writeJSON(w, http.StatusOK, resp)
}

// payments lists payments: ?state=, ?order_token=, ?limit= (1 to sale.MaxPage, defaultPage when left out).
func (s *Server) paymentList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := sale.PaymentFilter{State: sale.PaymentState(q.Get("state")), OrderToken: q.Get("order_token"), Limit: queryInt(q.Get("limit"), defaultPage)}
	ps, err := s.payments.List(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	resp := wire.PaymentsResponse{Payments: make([]*wire.PaymentResponse, len(ps))}
	for i, p := range ps {
		resp.Payments[i] = s.paymentOf(p)
	}
	writeJSON(w, http.StatusOK, resp)
}

// refunded records an operator's word that a payment waiting for its refund was given back
// (by hand, at the provider): what the provider's refunded callback would do.
func (s *Server) refunded(w http.ResponseWriter, r *http.Request) {
	if err := decodeEmpty(w, r, &struct{}{}); err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	noteTarget(r, id)
	p, err := s.payments.Payment(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.settle(w, r, sale.PaymentNotice{PaymentID: p.ID, OrderToken: p.OrderToken, AmountCents: p.ReceivedCents, Outcome: sale.OutcomeRefunded,
		Provider: p.Provider})
}
