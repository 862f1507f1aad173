package wire

import (
	"time"
)

// ReservationResponse is a buyer's reservation of a reservation sale: POST
// /api/activities/{id}/reservations (201 the first time, 200 after) and GET
// /api/activities/{id}/reservations/me. Number counts from 1 in the order of reservation; Wave
// and OpensAt are null until the reservations close at the start.
type ReservationResponse struct {
	ActivityID string     `json:"activity_id"`
	UserID     string     `json:"user_id"`
	Number     int64      `json:"number"`
	ReservedAt time.Time  `json:"reserved_at"`
	Wave       *int64     `json:"wave"`
	OpensAt    *time.Time `json:"opens_at"`
}

// ReservationSaleResponse is the public view of a reservation sale's terms: when its
// reservations open (they close at its start), its waves and when each opens, and the order they
// are filled in (reserved: the order of reservation; random: drawn at the close with the seed
// whose SHA-256 is DrawCommitment, revealed as DrawSeed from the start).
type ReservationSaleResponse struct {
	ReserveFrom    time.Time   `json:"reserve_from"`
	Waves          int64       `json:"waves"`
	WaveIntervalS  int64       `json:"wave_interval_s"`
	WaveOrder      string      `json:"wave_order"`
	WaveOpensAt    []time.Time `json:"wave_opens_at"`
	DrawCommitment string      `json:"draw_commitment"`
	DrawSeed       string      `json:"draw_seed,omitempty"`
}

// ForecastResponse is a reservation sale's crowd forecast, and the deployment planned for its
// peak (Plan, capacity.Plan's JSON; left out when the node cannot plan, PlanError saying why).
type ForecastResponse struct {
	ActivityID      string        `json:"activity_id"`
	Reserved        int64         `json:"reserved"`
	ExpectedBuyers  int64         `json:"expected_buyers"`
	ExpectedClicks  int64         `json:"expected_clicks"`
	ExpectedPeakRPS float64       `json:"expected_peak_rps"`
	Basis           string        `json:"basis"`
	Model           CrowdModel    `json:"model"`
	History         []SaleHistory `json:"history"`
	Plan            any           `json:"plan,omitempty"`
	PlanError       string        `json:"plan_error,omitempty"`
}

// CrowdModel is how a reservation sale's crowd behaves (sale.CrowdModel): Sales past sales
// fitted from, 0 for the prior.
type CrowdModel struct {
	BuyersPerReservation float64 `json:"buyers_per_reservation"`
	ClicksPerBuyer       float64 `json:"clicks_per_buyer"`
	PeakFactor           float64 `json:"peak_factor"`
	Sales                int     `json:"sales"`
}

// SaleHistory is what the crowd of a past reservation sale did (sale.SaleHistory).
type SaleHistory struct {
	ActivityID    string    `json:"activity_id"`
	ArchivedAt    time.Time `json:"archived_at"`
	Reserved      int64     `json:"reserved"`
	Buyers        int64     `json:"buyers"`
	Clicks        int64     `json:"clicks"`
	Waves         int64     `json:"waves"`
	WaveIntervalS int64     `json:"wave_interval_s"`
	PeakRPS       int64     `json:"peak_rps"`
	PeakFactor    float64   `json:"peak_factor"`
	Spread        []float64 `json:"spread"`
}
