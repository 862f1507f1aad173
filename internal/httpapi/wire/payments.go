package wire

import (
	"time"

	"seckill/internal/sale"
)

// PaymentResponse is a payment through a provider. PayURL is where the buyer pays, in the pay
// call's answer; ReceivedCents what the provider took (what a refund gives back), and
// RefundReason why it is owed back.
type PaymentResponse struct {
	PaymentID   string            `json:"payment_id"`
	Provider    string            `json:"provider"`
	OrderToken  string            `json:"order_token"`
	AmountCents int64             `json:"amount_cents"`
	State       sale.PaymentState `json:"state"`
	PayURL      string            `json:"pay_url,omitempty"`
	// PayQR is pay_url's QR code, a PNG data URL, when the buyer scans it with the provider's
	// app (WeChat Pay's Native code URL, on a desktop).
	PayQR         string            `json:"pay_qr,omitempty"`
	ReceivedCents int64             `json:"received_cents"`
	RefundReason  sale.RefundReason `json:"refund_reason,omitempty"`
	CreatedAt     time.Time         `json:"created_at"`
	UpdatedAt     time.Time         `json:"updated_at"`
}

// ProvidersResponse is GET /api/payments/providers: the providers the buyers may pay at, the
// default first.
type ProvidersResponse struct {
	Providers []string `json:"providers"`
}

// PayRequest is the body of the buyer's pay call with payment providers (none, or an empty
// object, with one): the provider to pay at.
type PayRequest struct {
	Provider string `json:"provider,omitempty"`
}

// CallbackRequest is the provider's word on a payment, the body of POST /api/payments/callback.
type CallbackRequest struct {
	OrderToken  string              `json:"order_token"`
	PaymentID   string              `json:"payment_id"`
	AmountCents *int64              `json:"amount_cents"`
	Status      sale.PaymentOutcome `json:"status"`
}

// SettlementResponse is what a callback (or an operator's refund) left: the payment, its order
// (none for money taken against an order we do not have), and whether this call changed them
// (false: a duplicate, which changed nothing).
type SettlementResponse struct {
	Payment *PaymentResponse `json:"payment"`
	Order   *OrderResponse   `json:"order,omitempty"`
	Changed bool             `json:"changed"`
}

// PaymentsResponse is a list of payments, newest first.
type PaymentsResponse struct {
	Payments []*PaymentResponse `json:"payments"`
}
