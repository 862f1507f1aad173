package wire

// GrabResponse is the 202 answer to a grab.
type GrabResponse struct {
	Status      string `json:"status"`
	OrderToken  string `json:"order_token"`
	AmountCents int64  `json:"amount_cents"` // the share won (red packet) or the price (item)
}

// GrabBody is what a grab may carry: nothing, or a JSON object of these fields. A field the
// grab does not define is refused, so that one a client believes in (a quantity) is never
// silently ignored.
type GrabBody struct {
	// Signals are what the product page measured before the click, for the risk model.
	Signals *Signals `json:"signals,omitempty"`
}

// Signals is the product page's summary of the pointer or touch movement between its load and
// the click, and its device fingerprint (see docs/operating.md, the risk rules: what goes in; a hint, not an identity).
type Signals struct {
	Moves            int     `json:"moves"`
	PathPx           float64 `json:"path_px"`
	DirectionEntropy float64 `json:"direction_entropy"`
	SpeedCV          float64 `json:"speed_cv"`
	Touch            bool    `json:"touch"`
	LoadToClickMs    int64   `json:"load_to_click_ms"`
	Fingerprint      string  `json:"fingerprint,omitempty"`
}
