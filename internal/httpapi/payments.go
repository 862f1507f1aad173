package httpapi

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/skip2/go-qrcode"

	"seckill/internal/httpapi/wire"
	"seckill/internal/sale"
	"seckill/internal/signature"
)

// Callback is the generic provider's (signature.Provider): its callbacks, at
// POST /api/payments/callback, are signed with Secret.
type Callback struct {
	Secret []byte
	// Now is the clock a callback's signature is checked on (the provider's is the real time,
	// whatever clock the sale runs on); nil: time.Now.
	Now func() time.Time
}

// Notices reads one provider's notices in its own format (its webhook, its notify URL), at
// POST /api/payments/{Name}: each provider's adapter is one (internal/stripepay, alipay,
// wechatpay).
type Notices interface {
	Name() string
	// Notice checks what the provider posted, before anything in it is read, and returns its
	// word on a payment; ok is false for a notice of nothing to apply (an event the node does
	// not act on), which is taken all the same.
	Notice(h http.Header, body []byte) (n sale.PaymentNotice, ok bool, err error)
	// Answer writes the provider's answer to a notice: err nil, taken (applied, a repeat, or
	// nothing to apply); else refused, for the provider to send it again.
	Answer(w http.ResponseWriter, err error)
}

func (s *Server) paymentOf(p sale.Payment) *wire.PaymentResponse {
	return &wire.PaymentResponse{PaymentID: p.ID, Provider: p.Provider, OrderToken: p.OrderToken, AmountCents: p.AmountCents, State: p.State,
		ReceivedCents: p.ReceivedCents, RefundReason: p.RefundReason, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
}

// startPayment is the buyer's pay call with providers: 202 and the order, still CREATED, with
// its payment and where to pay it. The body may name the provider ({"provider":"alipay"}; it
// must with several).
func (s *Server) startPayment(w http.ResponseWriter, r *http.Request, user string) {
	var req wire.PayRequest
	if err := decodeEmpty(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	c := sale.Checkout{Payment: sale.Payment{Provider: req.Provider}, Mobile: mobile(r.UserAgent()), ClientIP: s.clientIP(r).String()}
	p, payURL, err := s.payments.Start(r.Context(), user, r.PathValue("ref"), c)
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
	resp.Payment.PayURL = payURL
	if strings.HasPrefix(payURL, "weixin://") {
		resp.Payment.PayQR = qrDataURL(payURL)
	}
	writeJSON(w, http.StatusAccepted, resp)
}

// qrDataURL is text's QR code as a PNG data URL, for the page to show a desktop's buyer, who
// scans it with the provider's app (WeChat Pay's Native code URL); "" should it not encode.
func qrDataURL(text string) string {
	png, err := qrcode.Encode(text, qrcode.Medium, 256)
	if err != nil {
		return ""
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)
}

// paymentProviders are the providers the buyers may pay at, the default first; none without
// payments.
func (s *Server) paymentProviders() []string {
	if s.payments == nil {
		return nil
	}
	return s.payments.Providers()
}

// providerList answers the providers the buyers may pay at: what the product page offers.
func (s *Server) providerList(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, wire.ProvidersResponse{Providers: s.payments.Providers()})
}

// mobile says a User-Agent is a phone's browser.
func mobile(ua string) bool {
	return strings.Contains(ua, "Mobi") || strings.Contains(ua, "Android") || strings.Contains(ua, "iPhone")
}

// notice takes a provider's notice in its own format: checked over the raw body before anything
// in it is read, then applied as the generic callback's would be. A forged, altered or stale
// notice changes nothing and is refused in the provider's words.
func (s *Server) notice(n Notices) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body) // bounded by ServeHTTP's MaxBytesReader
		if err != nil {
			n.Answer(w, err)
			return
		}
		pn, ok, err := n.Notice(r.Header, body)
		if err == nil && ok {
			_, err = s.payments.Settle(r.Context(), pn)
		}
		if err != nil {
			s.log.Warn("payment notice refused", "provider", n.Name(), "err", err, "request_id", requestID(w))
		}
		n.Answer(w, err)
	}
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
	if err := signature.Verify(s.callback.Secret, r.Header.Get(signature.Header), body, s.callback.Now(), signature.Tolerance); err != nil {
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
	s.settle(w, r, sale.PaymentNotice{Provider: signature.ProviderName, PaymentID: req.PaymentID, OrderToken: req.OrderToken, AmountCents: *req.AmountCents,
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
