package wire

import "time"

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
