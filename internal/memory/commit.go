package memory

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
	v   T
	err chan error
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

// append queues v for the next batch and waits until that batch is committed or refused. It does
// not give up when the caller's context ends: the state in memory has moved already (a unit
// taken, a place given), so the outcome must be known before anyone is answered.
func (c *committer[T]) append(v T) error {
	e := &entry[T]{v: v, err: make(chan error, 1)}
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return errClosed
	}
	c.in <- e
	c.mu.RUnlock()
	return <-e.err
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
			e.err <- err
		}
		if err == nil {
			c.committed()
		}
	}
}
