package wire

import (
	"time"

	"seckill/internal/sale"
)

// BlockRequest is the body of POST /api/admin/blocks.
type BlockRequest struct {
	Kind   string `json:"kind"`  // "user" or "ip"
	Value  string `json:"value"` // a user id, an address or a CIDR network
	Reason string `json:"reason"`
	Until  string `json:"until"` // RFC 3339; empty: until removed
}

// BlockResponse is a blacklist entry (sale.Block).
type BlockResponse struct {
	Kind      sale.BlockKind `json:"kind"`
	Value     string         `json:"value"` // a user id, or an address or network in canonical CIDR form
	Reason    string         `json:"reason"`
	Until     time.Time      `json:"until,omitzero"`
	CreatedAt time.Time      `json:"created_at"`
}

// BlocksResponse is the list of blocked users and addresses.
type BlocksResponse struct {
	Blocks []BlockResponse `json:"blocks"`
}
