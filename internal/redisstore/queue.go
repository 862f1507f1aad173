package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/sale"
)

// Group is the consumer group of the workers on every activity's stream.
const Group = "workers"

var _ sale.Queue = (*Queue)(nil)

// Queue is a sale.Queue on the activities' Redis streams: each node's worker is one consumer of
// the group. An entry stays pending until acknowledged; entries a dead consumer left pending for
// ClaimIdle are claimed by a live one. Acknowledged entries are deleted, so a stream holds only
// grabs still on their way to orders.
type Queue struct {
	rdb        redis.UniversalClient
	consumer   string
	activities func(ctx context.Context) ([]sale.Activity, error) // the activities to consume
	claimIdle  time.Duration
	poll       time.Duration
	listEvery  time.Duration // how often the activities are listed again
	topo       *Topology     // reloads the cluster's map when a read meets a failover
	repl       Replication   // how far the entries read must have gone before they are delivered

	mu     sync.Mutex
	groups map[string]bool // streams whose group is known to exist
	// unconfirmed are the streams whose last entries read had not reached the replicas: they are
	// pending on this consumer, and read again (from its own pending list) before any new one.
	unconfirmed map[string]bool
	ids         []string        // the streams of acts
	acts        []sale.Activity // as last listed
	listedAt    time.Time
	claimedAt   time.Time
}

// NewQueue returns a queue read by consumer (unique per node), over the streams of the
// activities that activities lists (each activity's, and each shard's of a sharded stock),
// looking every poll when idle; entries pending longer than claimIdle on a dead consumer are
// taken over.
func NewQueue(rdb redis.UniversalClient, consumer string, activities func(ctx context.Context) ([]sale.Activity, error),
	poll, claimIdle time.Duration) *Queue {
	return &Queue{rdb: rdb, consumer: consumer, activities: activities, poll: poll, claimIdle: claimIdle,
		listEvery: time.Second, groups: map[string]bool{}, unconfirmed: map[string]bool{}, topo: NewTopology(rdb)}
}

// WithReplication makes the queue deliver only entries that r's replicas hold, as the gate
// acknowledges only grabs they hold. Otherwise a grab answered BUSY for want of replicas (its
// write standing on the master alone) could become an order and then vanish from Redis with a
// failover: its buyer's holding and idempotency key gone, the retry would win again, and the
// database would refuse that acknowledged grab as a second one. An entry read before its
// replicas have it stays pending on this consumer and is read again on the next Receive; if a
// failover lost it, it is gone with the rest of that grab, which nobody was told had won.
func (q *Queue) WithReplication(r Replication) *Queue {
	q.repl = r
	return q
}

// WithListEvery sets how often the queue lists the activities again (a second): an activity
// created meanwhile has its grabs read only from the next listing on.
func (q *Queue) WithListEvery(d time.Duration) *Queue {
	q.listEvery = d
	return q
}

// ensureGroup creates the consumer group of a stream, reading from its start, unless it exists.
func ensureGroup(ctx context.Context, rdb redis.UniversalClient, stream string) error {
	err := rdb.XGroupCreateMkStream(ctx, stream, Group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return err
	}
	return nil
}

// streams returns the streams to read, of the activities listed again every listEvery, each
// with its group ensured.
func (q *Queue) streams(ctx context.Context) ([]string, error) {
	ids, _, err := q.listed(ctx)
	return ids, err
}

// listed returns the streams to read and the activities they are of.
func (q *Queue) listed(ctx context.Context) ([]string, []sale.Activity, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if time.Since(q.listedAt) < q.listEvery {
		return q.ids, q.acts, nil
	}
	listed, err := q.activities(ctx)
	if err != nil {
		return nil, nil, err
	}
	// An archived activity's streams are gone with its hot state: nothing to read there.
	acts := slices.DeleteFunc(slices.Clone(listed), sale.Activity.Archived)
	ids := StreamIDs(acts)
	for _, id := range ids {
		if !q.groups[id] {
			if err := ensureGroup(ctx, q.rdb, StreamKey(id)); err != nil {
				return nil, nil, sale.Busy(err, "redis")
			}
			q.groups[id] = true
		}
	}
	q.ids, q.acts, q.listedAt = ids, acts, time.Now()
	return ids, acts, nil
}

// Receive implements sale.Queue: entries claimed from dead consumers first, then new ones. A
// stream that cannot be read (its master failing over) does not keep back the entries read from
// the others: they are returned, and the error only when nothing was read.
func (q *Queue) Receive(ctx context.Context, max int) ([]sale.Delivery, error) {
	for {
		ids, err := q.streams(ctx)
		if err != nil {
			q.topo.Classify(err)
			return nil, err
		}
		var out []sale.Delivery
		var failed error
		claim := q.claimDue()
		for _, id := range ids {
			if len(out) >= max {
				break
			}
			ds, err := q.read(ctx, id, max-len(out), claim)
			if err != nil {
				q.topo.Classify(err)
				failed = err
				continue
			}
			out = append(out, ds...)
		}
		if len(out) == 0 && failed != nil {
			return nil, failed
		}
		if len(out) > 0 {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(q.poll):
		}
	}
}

// claimDue reports whether it is time to look for entries of dead consumers.
func (q *Queue) claimDue() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if time.Since(q.claimedAt) < q.claimIdle/2 {
		return false
	}
	q.claimedAt = time.Now()
	return true
}

func (q *Queue) read(ctx context.Context, id string, max int, claim bool) ([]sale.Delivery, error) {
	stream := StreamKey(id)
	var msgs []redis.XMessage
	var counts map[string]int // delivery counts of claimed entries
	if claim {
		var claimed *redis.XAutoClaimCmd
		err := q.confirmed(ctx, id, func(c redis.Cmdable) redis.Cmder {
			claimed = c.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: stream, Group: Group,
				MinIdle: q.claimIdle, Start: "0-0", Count: int64(max), Consumer: q.consumer})
			return claimed
		})
		if err != nil {
			return nil, sale.Busy(err, "redis: claim %s", stream)
		}
		msgs, _ = claimed.Val()
		if len(msgs) > 0 {
			if counts, err = q.deliveries(ctx, stream, msgs); err != nil {
				return nil, err
			}
		}
	}
	if len(msgs) == 0 {
		from := ">" // entries never delivered
		if q.isUnconfirmed(id) {
			from = "0" // this consumer's own pending entries first, read before the replicas had them
		}
		var res *redis.XStreamSliceCmd
		err := q.confirmed(ctx, id, func(c redis.Cmdable) redis.Cmder {
			res = c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: Group, Consumer: q.consumer,
				Streams: []string{stream, from}, Count: int64(max), Block: -1})
			return res
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, sale.Busy(err, "redis: read %s", stream)
		}
		for _, s := range res.Val() {
			msgs = append(msgs, s.Messages...)
		}
		if from == "0" && len(msgs) < max {
			q.confirm(id) // every pending entry read again, and held by the replicas
		}
	}
	out := make([]sale.Delivery, 0, len(msgs))
	for _, m := range msgs {
		g, err := grabOfEntry(m)
		if err != nil {
			if err := q.bury(ctx, id, m); err != nil {
				return nil, err
			}
			continue
		}
		attempts := 1
		if n, ok := counts[m.ID]; ok {
			attempts = n
		}
		out = append(out, sale.Delivery{ID: deliveryID(id, m.ID), Grab: g, Attempts: attempts})
	}
	return out, nil
}

// confirmed runs read, an XAUTOCLAIM or XREADGROUP of the stream of id, and, when the queue
// waits for replicas, WAIT after it on the same connection to the stream's master. The read is a
// write (it moves the entries it returns to this consumer's pending list), so once the replicas
// have it they have every entry it returned. When they do not in time, the stream is marked
// unconfirmed and the error wraps errNotReplicated.
func (q *Queue) confirmed(ctx context.Context, id string, read func(redis.Cmdable) redis.Cmder) error {
	if q.repl.Replicas <= 0 {
		return read(q.rdb).Err()
	}
	node, err := masterOf(ctx, q.rdb, StreamKey(id))
	if err != nil {
		return err
	}
	var cmd redis.Cmder
	var wait *redis.IntCmd
	_, err = node.Pipelined(ctx, func(p redis.Pipeliner) error {
		cmd = read(p)
		wait = q.repl.waitCmd(ctx)
		return p.Process(ctx, wait)
	})
	if rerr := cmd.Err(); rerr != nil && !errors.Is(rerr, redis.Nil) {
		return rerr
	}
	if n, werr := wait.Result(); werr != nil || n < int64(q.repl.Replicas) {
		q.mu.Lock()
		q.unconfirmed[id] = true
		q.mu.Unlock()
		return fmt.Errorf("%w: %d of %d replicas (%v, %v)", errNotReplicated, n, q.repl.Replicas, werr, err)
	}
	return cmd.Err()
}

// isUnconfirmed reports whether entries read from the stream of id may be pending unconfirmed.
func (q *Queue) isUnconfirmed(id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.unconfirmed[id]
}

// confirm says that the stream of id holds no unconfirmed pending entry any more.
func (q *Queue) confirm(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.unconfirmed, id)
}

// bury moves an entry that is not a grab (written by something other than grab.lua) to the
// activity's dead-letter stream, so that it cannot stall the workers.
func (q *Queue) bury(ctx context.Context, activityID string, m redis.XMessage) error {
	values := map[string]any{"reason": "not a grab"}
	for k, v := range m.Values {
		values["field:"+k] = v
	}
	return q.moveToDead(ctx, activityID, m.ID, values)
}

// Bury implements sale.Queue: each delivery moves to its activity's dead-letter stream.
func (q *Queue) Bury(ctx context.Context, ds []sale.Delivery, reason string) error {
	for _, d := range ds {
		g := d.Grab
		values := map[string]any{"reason": reason, "attempts": d.Attempts, entryToken: g.Token, entryActivity: g.ActivityID,
			entryUser: g.UserID, entryKey: g.IdempotencyKey, entryShare: g.Share, entryAmount: g.AmountCents,
			entryAt: g.At.UnixMilli(), entryTrace: g.Trace}
		stream, id := splitDelivery(d)
		if err := q.moveToDead(ctx, stream, id, values); err != nil {
			return err
		}
	}
	return nil
}

// moveToDead adds values to the dead-letter stream and acknowledges and deletes the entry id, in
// one MULTI/EXEC on the activity's slot.
func (q *Queue) moveToDead(ctx context.Context, activityID, id string, values map[string]any) error {
	stream := StreamKey(activityID)
	values["id"] = id
	_, err := q.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.XAdd(ctx, &redis.XAddArgs{Stream: DeadKey(activityID), Values: values})
		p.XAck(ctx, stream, Group, id)
		p.XDel(ctx, stream, id)
		return nil
	})
	if err != nil {
		return sale.Busy(err, "redis: bury %s", id)
	}
	return nil
}

// deliveries reads how many times each claimed entry has been delivered, this time included.
func (q *Queue) deliveries(ctx context.Context, stream string, msgs []redis.XMessage) (map[string]int, error) {
	pend, err := q.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: Group,
		Start: msgs[0].ID, End: msgs[len(msgs)-1].ID, Count: int64(len(msgs)) + 1000}).Result()
	if err != nil {
		return nil, sale.Busy(err, "redis: pending %s", stream)
	}
	counts := make(map[string]int, len(pend))
	for _, p := range pend {
		counts[p.ID] = int(p.RetryCount)
	}
	return counts, nil
}

// Ack implements sale.Queue: acknowledged entries are deleted from their streams, one pipeline
// per activity (its keys share a slot).
func (q *Queue) Ack(ctx context.Context, ds []sale.Delivery) error {
	byStream := map[string][]string{}
	for _, d := range ds {
		stream, id := splitDelivery(d)
		s := StreamKey(stream)
		byStream[s] = append(byStream[s], id)
	}
	for stream, ids := range byStream {
		_, err := q.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.XAck(ctx, stream, Group, ids...)
			p.XDel(ctx, stream, ids...)
			return nil
		})
		if err != nil {
			return sale.Busy(err, "redis: ack %s", stream)
		}
	}
	return nil
}

// Pending implements sale.Queue: a grab Redis holds whose order the database has not got yet.
// A grab token carries the time of its grab, which was within its activity's window: only the
// activities open then are asked, each of their streams in one round trip.
func (q *Queue) Pending(ctx context.Context, token string) (sale.Grab, error) {
	ids, acts, err := q.listed(ctx)
	if err != nil {
		return sale.Grab{}, err
	}
	if at, ok := sale.GrabTokenTime(token); ok {
		var open []sale.Activity
		for _, a := range acts {
			// The token's time is the grab's cut to the millisecond: a grab in the start's
			// millisecond may read just before it.
			if !at.Before(a.StartAt.Add(-time.Millisecond)) && at.Before(a.EndAt) {
				open = append(open, a)
			}
		}
		ids = StreamIDs(open)
	}
	if len(ids) == 0 {
		return sale.Grab{}, fmt.Errorf("grab %s: %w", token, sale.ErrNotFound)
	}
	gets := make([]*redis.StringCmd, len(ids))
	_, err = q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			gets[i] = p.HGet(ctx, keysOf(id).grabs, token)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return sale.Grab{}, sale.Busy(err, "redis")
	}
	for i, get := range gets {
		rec, err := get.Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return sale.Grab{}, sale.Busy(err, "redis")
		}
		return parseRecord(baseID(ids[i]), token, rec)
	}
	return sale.Grab{}, fmt.Errorf("grab %s: %w", token, sale.ErrNotFound)
}

// deliveryID names an entry of the stream of id: its entry id, prefixed with the shard's id on
// the stream of a stock shard.
func deliveryID(id, entry string) string {
	if !strings.Contains(id, "/") {
		return entry
	}
	return id + "|" + entry
}

// splitDelivery returns the stream id and the entry id of a delivery.
func splitDelivery(d sale.Delivery) (stream, entry string) {
	if s, e, ok := strings.Cut(d.ID, "|"); ok {
		return s, e
	}
	return d.Grab.ActivityID, d.ID
}

// shardStreams returns the stream ids of a: its own and its stock shards'. The count is the
// activity's own: a cache that lost shard 0 (which records it) keeps the other shards' streams.
func shardStreams(a sale.Activity) []string {
	out := make([]string, 0, shardsOf(a))
	for i := range shardsOf(a) {
		out = append(out, ShardID(a.ID, i))
	}
	return out
}

// Depth implements sale.Queue: the entries not yet acknowledged, on every stream of the
// activity.
func (q *Queue) Depth(ctx context.Context, a sale.Activity) (int64, error) {
	var total int64
	for _, id := range shardStreams(a) {
		n, err := q.rdb.XLen(ctx, StreamKey(id)).Result()
		if err != nil {
			return 0, sale.Busy(err, "redis")
		}
		total += n
	}
	return total, nil
}

// Unacked implements sale.Queue: the grabs on every stream of the activity.
func (q *Queue) Unacked(ctx context.Context, a sale.Activity) ([]sale.Grab, error) {
	var out []sale.Grab
	for _, id := range shardStreams(a) {
		// In pages: a long stream is never one reply Redis must build (and block on) at once.
		for from := "-"; ; {
			msgs, err := q.rdb.XRangeN(ctx, StreamKey(id), from, "+", unackedPage).Result()
			if err != nil {
				return nil, sale.Busy(err, "redis")
			}
			for _, m := range msgs {
				g, err := grabOfEntry(m)
				if err != nil {
					return nil, err
				}
				out = append(out, g)
			}
			if len(msgs) < unackedPage {
				break
			}
			from = "(" + msgs[len(msgs)-1].ID // exclusive: after the page's last entry
		}
	}
	return out, nil
}

// unackedPage is how many stream entries one read of Unacked asks for.
const unackedPage = 1000
