package redisgate

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/sale"
)

var _ sale.Lease = (*Lease)(nil)

// Lease is a sale.Lease on one Redis key per name, "seckill:lease:NAME", holding the holder's
// name with the lease's expiry: it is taken when absent (SET NX PX) and extended only by its
// holder. A holder whose Redis fails over may lose it to another node a ttl early; the jobs it
// guards are safe to run twice, the lease only keeps them from running on every node.
type Lease struct {
	rdb redis.UniversalClient
}

// NewLease returns leases on rdb.
func NewLease(rdb redis.UniversalClient) *Lease { return &Lease{rdb: rdb} }

// holdScript takes or extends KEYS[1] for ARGV[1] for ARGV[2] ms: 1 if held, 0 if another has it.
var holdScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`)

// Hold implements sale.Lease.
func (l *Lease) Hold(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	n, err := holdScript.Run(ctx, l.rdb, []string{"seckill:lease:" + name}, holder, ttl.Milliseconds()).Int64()
	if err != nil {
		return false, fmt.Errorf("%w: lease %s on redis: %w", sale.ErrBusy, name, err)
	}
	return n == 1, nil
}
