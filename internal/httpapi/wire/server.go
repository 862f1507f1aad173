package wire

// FeaturesResponse is the answer to GET /api/admin/features: which of the features beside the
// core this node serves (sale.Features). A node without one has none of its routes (404), so a
// page asks first: the dashboard says "no outbox on this node" rather than failing a call.
type FeaturesResponse struct {
	Operator bool `json:"operator"`
	Payments bool `json:"payments"` // with a payment provider
	// PaymentProviders name the providers the buyers may pay at, the default first.
	PaymentProviders []string `json:"payment_providers,omitempty"`
	Outbox           bool     `json:"outbox"`
	Lines            bool     `json:"lines"`
	Boards           bool     `json:"boards"`
	Challenges       bool     `json:"challenges"`
	Blocks           bool     `json:"blocks"`
	Audit            bool     `json:"audit"`
	Reservations     bool     `json:"reservations"`
	Forecasts        bool     `json:"forecasts"`
}
