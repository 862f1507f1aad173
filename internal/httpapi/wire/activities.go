package wire

import (
	"time"

	"seckill/internal/sale"
)

// ActivityResponse is the public view of an activity.
type ActivityResponse struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	Kind         sale.Kind `json:"kind"`
	Status       string    `json:"status"` // upcoming, active, sold_out, ended
	Stock        int64     `json:"stock"`
	Remaining    *int64    `json:"remaining"` // approximate: the gate's count when asked; null when shed
	PriceCents   int64     `json:"price_cents,omitempty"`
	TotalCents   int64     `json:"total_cents,omitempty"`
	Currency     string    `json:"currency,omitempty"` // ISO 4217, lower case; none: the shop's own
	PerUserLimit int64     `json:"per_user_limit"`
	StartAt      time.Time `json:"start_at"`
	EndAt        time.Time `json:"end_at"`
	PayWindowS   int64     `json:"pay_window_s"`
	NowMS        int64     `json:"now_ms"`
	// RequireChallenge says grabs need a solved challenge's path token.
	RequireChallenge bool `json:"require_challenge"`
	// Admission is direct, queue, lottery or reservation; Line describes a queue or lottery's
	// line.
	Admission sale.Admission `json:"admission"`
	Line      *LineResponse  `json:"line,omitempty"`
	// Reservation describes a reservation sale's terms.
	Reservation *ReservationSaleResponse `json:"reservation,omitempty"`
	// Revision counts the activity's versions: 1 as created, one more for each change an
	// operator made (stock added, the sale ended early).
	Revision int64 `json:"revision"`
}

// LineResponse is the public view of a line. DrawCommitment (the seed's SHA-256) is public from
// the creation; DrawSeed once the early crowd is drawn, with its entries at EntriesURL.
type LineResponse struct {
	AdmitRate      int64   `json:"admit_rate"`
	QueueCap       int64   `json:"queue_cap"`
	Joined         int64   `json:"joined"`
	Waiting        int64   `json:"waiting"`
	Early          int64   `json:"early"`
	Sealed         bool    `json:"sealed"`
	DrainRate      float64 `json:"drain_rate"`
	DrawCommitment string  `json:"draw_commitment"`
	DrawSeed       string  `json:"draw_seed,omitempty"`
	EntriesURL     string  `json:"entries_url,omitempty"`
}

// CreateActivityRequest is the body of POST /api/admin/activities.
type CreateActivityRequest struct {
	Name             string `json:"name"`
	Kind             string `json:"kind"`
	Stock            *int64 `json:"stock,omitempty"`
	PriceCents       int64  `json:"price_cents,omitempty"`
	Currency         string `json:"currency,omitempty"`
	PerUserLimit     *int64 `json:"per_user_limit,omitempty"`
	StartAt          string `json:"start_at"`
	EndAt            string `json:"end_at"`
	PayWindowS       *int64 `json:"pay_window_s,omitempty"` // default DefaultPayWindowS
	TotalCents       int64  `json:"total_cents,omitempty"`
	Count            *int64 `json:"count,omitempty"`
	RequireChallenge bool   `json:"require_challenge,omitempty"`
	Admission        string `json:"admission,omitempty"`
	// StockShards splits an item's stock over that many Redis Cluster slots (default 1).
	StockShards int64 `json:"stock_shards,omitempty"`
	// QueueCap and AdmitRate set a queue or lottery line's cap of waiting tickets (default ten
	// times the stock) and its admissions a second (default 1000).
	QueueCap  int64 `json:"queue_cap,omitempty"`
	AdmitRate int64 `json:"admit_rate,omitempty"`
	// A reservation sale's terms: its reservations open at ReserveFrom (RFC 3339, default now)
	// and close at the start; Waves (default 1) open WaveIntervalS apart from the start, filled
	// in WaveOrder (reserved, the default, or random).
	ReserveFrom   string `json:"reserve_from,omitempty"`
	Waves         int64  `json:"waves,omitempty"`
	WaveIntervalS int64  `json:"wave_interval_s,omitempty"`
	WaveOrder     string `json:"wave_order,omitempty"`
	// RateLimits override the node's grab rate limits for this activity, in requests per
	// second; 0 switches one off, and one left out keeps the node's.
	RateLimits *RateLimitsRequest `json:"rate_limits,omitempty"`
}

// RateLimitsRequest is an activity's own grab rate limits in requests per second: 0 switches one
// off, and one left out is left as it is (the node's, on a new activity).
type RateLimitsRequest struct {
	PerUser *int64 `json:"per_user,omitempty"`
	PerIP   *int64 `json:"per_ip,omitempty"`
	Global  *int64 `json:"global,omitempty"`
}

// CreatedResponse is the 201 answer to POST /api/admin/activities: the new activity's id.
type CreatedResponse struct {
	ID string `json:"id"`
}

// PublicActivitiesResponse is GET /api/activities: the activities that have not ended, and the
// node's clock (for the pages' countdowns).
type PublicActivitiesResponse struct {
	Activities []ActivityResponse `json:"activities"`
	NowMS      int64              `json:"now_ms"`
}

// DefaultPayWindowS is an activity's payment window when its create request names none.
const DefaultPayWindowS = 900
