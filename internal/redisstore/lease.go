package redisstore

import (
	"context"
	_ "embed"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/sale"
)

var _ sale.Lease = (*Lease)(nil)

// Lease is a sale.Lease on one Redis key per name, "seckill:lease:NAME", holding the holder's
// name with the lease's expiry: it is taken when absent (SET NX PX) and extended only by its
// holder. A holder whose Redis fails over may lose it to another node a ttl early; the jobs it
// guards are safe to run twice, the lease only keeps them from running on every node (a relay,
// whose posts should not overlap another node's, finds out at its next extension and stops: see
// relay.Relay.Round).
type Lease struct {
	rdb redis.UniversalClient
}

// NewLease returns leases on rdb.
func NewLease(rdb redis.UniversalClient) *Lease { return &Lease{rdb: rdb} }

var (
	//go:embed lease.lua
	leaseLua    string
	leaseScript = redis.NewScript(leaseLua)
)

// hold takes or extends the lease key for holder for ttl (lease.lua).
func hold(ctx context.Context, rdb redis.UniversalClient, key, holder string, ttl time.Duration) (bool, error) {
	n, err := leaseScript.Run(ctx, rdb, []string{key}, holder, ttl.Milliseconds()).Int64()
	return n == 1, err
}

// Hold implements sale.Lease.
func (l *Lease) Hold(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	held, err := hold(ctx, l.rdb, leaseKey(name), holder, ttl)
	if err != nil {
		return false, sale.Busy(err, "lease %s on redis", name)
	}
	return held, nil
}
