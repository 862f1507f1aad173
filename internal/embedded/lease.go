package embedded

import (
	"context"
	"sync"
	"time"

	"seckill/internal/sale"
)

var _ sale.Lease = (*Lease)(nil)

// Lease is a sale.Lease within one process (the embedded mode's one node), on a clock.
type Lease struct {
	now func() time.Time
	mu  sync.Mutex
	by  map[string]held
}

type held struct {
	holder string
	until  time.Time
}

// NewLease returns leases on the clock now.
func NewLease(now func() time.Time) *Lease { return &Lease{now: now, by: map[string]held{}} }

// Hold implements sale.Lease.
func (l *Lease) Hold(_ context.Context, name, holder string, ttl time.Duration) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if h, ok := l.by[name]; ok && h.holder != holder && now.Before(h.until) {
		return false, nil
	}
	l.by[name] = held{holder, now.Add(ttl)}
	return true, nil
}
