package embedded

import (
	"context"
	"errors"
	"sync"
)

// errClosed refuses writes that arrive after Close.
var errClosed = errors.New("closed")

// committer group-commits records (the gate's grabs, the lines' tickets): callers queue up while
// a transaction is being written, and the next transaction takes all of them, so the commit rate,
// not the request rate, is bounded by the disk.
type committer[T any] struct {
	write     func(context.Context, []T) error
	maxBatch  int
	committed func()

	mu     sync.RWMutex // held for reading by append, for writing by close
	closed bool
	in     chan *entry[T]
	done   chan struct{}
}

type entry[T any] struct {
	v      T
	settle func(error)
}

func newCommitter[T any](write func(context.Context, []T) error, maxBatch int, committed func()) *committer[T] {
	if maxBatch <= 0 {
		maxBatch = 512
	}
	if committed == nil {
		committed = func() {}
	}
	c := &committer[T]{write: write, maxBatch: maxBatch, committed: committed,
		in: make(chan *entry[T], 4*maxBatch), done: make(chan struct{})}
	go c.run()
	return c
}

// append queues v for the next batch, and settle learns that batch's outcome (nil: committed)
// once it is known, on the committer's goroutine: settle must be quick and must not wait for the
// committer. After close, settle learns errClosed at once, on the caller's goroutine. The state
// in memory has moved already when v is appended (a unit taken, a place given), so it is settle
// that puts it right or makes it final, whether or not anyone still waits for the answer.
func (c *committer[T]) append(v T, settle func(error)) {
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		settle(errClosed)
		return
	}
	c.in <- &entry[T]{v: v, settle: settle}
	c.mu.RUnlock()
}

// close refuses new grabs, flushes those queued and waits for the writer to stop.
func (c *committer[T]) close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.in)
	}
	c.mu.Unlock()
	<-c.done
	return nil
}

func (c *committer[T]) run() {
	defer close(c.done)
	batch := make([]*entry[T], 0, c.maxBatch)
	vs := make([]T, 0, c.maxBatch)
	for e := range c.in {
		batch = append(batch[:0], e)
	fill:
		for len(batch) < c.maxBatch {
			select {
			case e, ok := <-c.in:
				if !ok {
					break fill
				}
				batch = append(batch, e)
			default:
				break fill
			}
		}
		vs = vs[:0]
		for _, e := range batch {
			vs = append(vs, e.v)
		}
		err := c.write(context.Background(), vs)
		for _, e := range batch {
			e.settle(err)
		}
		if err == nil {
			c.committed()
		}
	}
}
