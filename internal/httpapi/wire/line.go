package wire

import (
	"time"

	"seckill/internal/sale"
)

// TicketResponse is a ticket in a queue or lottery line as its owner sees it: the answer to a
// grab that joined the line (202) and to GET /api/queue/{token}.
type TicketResponse struct {
	// Status is WAITING (JOINED in the 202 of a first join, ALREADY_QUEUED when the user had a
	// ticket waiting), then WON, SOLD_OUT, NOT_DRAWN, ALREADY_BOUGHT or ENDED.
	Status     string         `json:"status"`
	QueueToken string         `json:"queue_token"`
	ActivityID string         `json:"activity_id"`
	Admission  sale.Admission `json:"admission"`
	// Position counts the tickets up to this one (1: next); null while the early crowd awaits
	// the draw at the start, and once answered.
	Position *int64 `json:"position"`
	// Place is the ticket's place in the line from its first (1), fixed once given: the draw's
	// for the early crowd, the order of arrival after; null while the early crowd awaits the draw.
	Place          *int64    `json:"place"`
	EstimatedWaitS *float64  `json:"estimated_wait_s"`
	Early          bool      `json:"early"` // joined before the start: placed by the draw
	JoinedAt       time.Time `json:"joined_at"`
	DrawAt         time.Time `json:"draw_at"` // the start, when the early crowd is drawn
	OrderToken     string    `json:"order_token,omitempty"`
	AmountCents    int64     `json:"amount_cents,omitempty"`
	Waiting        int64     `json:"waiting"` // the line's length
}
