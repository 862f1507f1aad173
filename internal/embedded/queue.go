package embedded

import (
	"context"
	"strconv"
	"sync"
	"time"

	"seckill/internal/sale"
)

var _ sale.Queue = (*Queue)(nil)

// Queue hands the journal's grabs to the worker in sequence order. There is one consumer per
// process; what it has not acknowledged when the process dies is delivered again on the next
// start, because the journal still holds it.
type Queue struct {
	journal sale.Journal
	wake    chan struct{}
	poll    time.Duration
	linger  time.Duration

	mu    sync.Mutex
	after int64 // highest sequence handed out

	// Acknowledgements are written in bulk: removing a placed grab only spares the next start a
	// redelivery (which placing ignores), so losing the last few to a crash costs nothing else.
	ackMu   sync.Mutex
	acks    []string
	ackedAt time.Time
}

// Bulk acknowledgement: flushed at this many, or this long after the last flush, or when idle.
const (
	ackBatch = 1024
	ackEvery = 250 * time.Millisecond
)

// NewQueue returns a queue over j that looks for new grabs every poll, and linger after being
// woken (see Wake). Lingering lets a busy sale's grabs gather into one batch for the worker, so
// the worker's transactions, which share the one SQLite writer with the gate's commits, are few
// and large rather than many and small.
func NewQueue(j sale.Journal, poll, linger time.Duration) *Queue {
	return &Queue{journal: j, wake: make(chan struct{}, 1), poll: poll, linger: linger}
}

// Wake tells a waiting Receive that grabs were committed.
func (q *Queue) Wake() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Receive implements sale.Queue.
func (q *Queue) Receive(ctx context.Context, max int) ([]sale.Delivery, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	t := time.NewTimer(q.poll)
	defer t.Stop()
	for {
		ds, err := q.journal.QueuedGrabs(ctx, q.after, max)
		if err != nil {
			return nil, err
		}
		if len(ds) == 0 {
			if err := q.flushAcks(ctx, true); err != nil {
				return nil, err
			}
		}
		if len(ds) > 0 {
			last, err := strconv.ParseInt(ds[len(ds)-1].ID, 10, 64)
			if err != nil {
				return nil, err
			}
			q.after = last
			return ds, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-q.wake:
			if q.linger > 0 {
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(q.linger):
				}
			}
		case <-t.C:
			t.Reset(q.poll)
		}
	}
}

// Ack implements sale.Queue. The placed grabs leave the journal in bulk (see Queue).
func (q *Queue) Ack(ctx context.Context, ds []sale.Delivery) error {
	q.ackMu.Lock()
	for _, d := range ds {
		q.acks = append(q.acks, d.Grab.Token)
	}
	q.ackMu.Unlock()
	return q.flushAcks(ctx, false)
}

// flushAcks removes the acknowledged grabs from the journal if there are enough of them, if they
// are old enough, or if all is true.
func (q *Queue) flushAcks(ctx context.Context, all bool) error {
	q.ackMu.Lock()
	defer q.ackMu.Unlock()
	if len(q.acks) == 0 || !all && len(q.acks) < ackBatch && time.Since(q.ackedAt) < ackEvery {
		return nil
	}
	if err := q.journal.RemoveGrabs(ctx, q.acks); err != nil {
		return err
	}
	q.acks, q.ackedAt = q.acks[:0], time.Now()
	return nil
}

// Pending implements sale.Queue.
func (q *Queue) Pending(ctx context.Context, token string) (sale.Grab, error) {
	return q.journal.QueuedGrab(ctx, token)
}

// Depth implements sale.Queue.
func (q *Queue) Depth(ctx context.Context, a sale.Activity) (int64, error) {
	return q.journal.QueueDepth(ctx, a.ID)
}

// Unacked implements sale.Queue.
func (q *Queue) Unacked(ctx context.Context, a sale.Activity) ([]sale.Grab, error) {
	return q.journal.UnackedGrabs(ctx, a.ID)
}

// Bury implements sale.Queue: the grabs leave the journal at once; the database's dead_letters
// table (see the worker) is where they are kept.
func (q *Queue) Bury(ctx context.Context, ds []sale.Delivery, reason string) error {
	tokens := make([]string, len(ds))
	for i, d := range ds {
		tokens[i] = d.Grab.Token
	}
	return q.journal.RemoveGrabs(ctx, tokens)
}
