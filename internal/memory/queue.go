package memory

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
// start, because the journal still has it as not done.
type Queue struct {
	journal Journal
	wake    chan struct{}
	poll    time.Duration

	mu    sync.Mutex
	after int64 // highest sequence handed out
}

// NewQueue returns a queue over j that looks for new grabs when woken (see Wake) and every poll.
func NewQueue(j Journal, poll time.Duration) *Queue {
	return &Queue{journal: j, wake: make(chan struct{}, 1), poll: poll}
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
		case <-t.C:
			t.Reset(q.poll)
		}
	}
}

// Ack implements sale.Queue.
func (q *Queue) Ack(ctx context.Context, ds []sale.Delivery) error {
	tokens := make([]string, len(ds))
	for i, d := range ds {
		tokens[i] = d.Grab.Token
	}
	return q.journal.MarkDone(ctx, tokens)
}

// Pending implements sale.Queue.
func (q *Queue) Pending(ctx context.Context, token string) (sale.Grab, error) {
	return q.journal.QueuedGrab(ctx, token)
}

// Depth implements sale.Queue.
func (q *Queue) Depth(ctx context.Context, activityID string) (int64, error) {
	return q.journal.QueueDepth(ctx, activityID)
}

// Unacked implements sale.Queue.
func (q *Queue) Unacked(ctx context.Context, activityID string) ([]sale.Grab, error) {
	return q.journal.UnackedGrabs(ctx, activityID)
}
