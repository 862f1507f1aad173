package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"

	"seckill/internal/sale"
)

// RestocksChannel is the Redis pub/sub channel on which nodes announce restocked activities. In a
// Redis Cluster a PUBLISH reaches the subscribers of every node.
const RestocksChannel = "seckill:restocked"

var _ sale.Restocks = (*Restocks)(nil)

// Restocks announces restocks to every node over Redis pub/sub.
type Restocks struct {
	rdb redis.UniversalClient
}

// NewRestocks returns restock announcements on rdb.
func NewRestocks(rdb redis.UniversalClient) *Restocks { return &Restocks{rdb: rdb} }

// Announce implements sale.Restocks.
func (r *Restocks) Announce(ctx context.Context, activityID string) error {
	if err := r.rdb.Publish(ctx, RestocksChannel, activityID).Err(); err != nil {
		return sale.Busy(err, "announce the restock of %s", activityID)
	}
	return nil
}

// Listen implements sale.Restocks. go-redis resubscribes after a broken connection by itself;
// what was announced meanwhile is lost, which the sold-out flags' expiry covers.
func (r *Restocks) Listen(ctx context.Context, heard func(activityID string)) error {
	sub := r.rdb.Subscribe(ctx, RestocksChannel)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the subscription's confirmation
		return sale.Busy(err, "subscribe to %s", RestocksChannel)
	}
	ch := sub.Channel()
	for {
		select {
		case <-ctx.Done():
			return nil
		case msg, ok := <-ch:
			if !ok {
				return nil
			}
			if sale.ValidID(msg.Payload) {
				heard(msg.Payload)
			}
		}
	}
}
