package wire

import (
	"seckill/internal/breaker"
	"seckill/internal/funnel"
)

// LiveEvent is one event of an activity's live stream: the stats (or, on a degraded node, what
// is left of them), the node's health, and the funnel and per-second series of this node's grab
// endpoint. StatsError says why the stats are missing, when they are.
type LiveEvent struct {
	AtMS       int64         `json:"at_ms"`
	Health     breaker.Level `json:"health"`
	Stats      any           `json:"stats,omitempty"`
	StatsError *Error        `json:"stats_error,omitempty"`
	Node       funnel.View   `json:"node"`
}
