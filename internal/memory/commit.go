package memory

import (
	"context"
	"errors"
	"sync"

	"seckill/internal/sale"
)

// errClosed refuses grabs that arrive after Close.
var errClosed = errors.New("gate closed")

// committer group-commits grabs: callers queue up while a transaction is being written, and the
// next transaction takes all of them, so the commit rate, not the grab rate, is bounded by the
// disk.
type committer struct {
	journal   Journal
	maxBatch  int
	committed func()

	mu     sync.RWMutex // held for reading by append, for writing by close
	closed bool
	in     chan *entry
	done   chan struct{}
}

type entry struct {
	grab sale.Grab
	err  chan error
}

func newCommitter(j Journal, maxBatch int, committed func()) *committer {
	if maxBatch <= 0 {
		maxBatch = 512
	}
	if committed == nil {
		committed = func() {}
	}
	c := &committer{journal: j, maxBatch: maxBatch, committed: committed,
		in: make(chan *entry, 4*maxBatch), done: make(chan struct{})}
	go c.run()
	return c
}

// append queues g for the next batch and waits until that batch is committed or refused. It does
// not give up when the caller's context ends: the unit is already taken, so the outcome must be
// known before the gate can answer anyone.
func (c *committer) append(g sale.Grab) error {
	e := &entry{grab: g, err: make(chan error, 1)}
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
func (c *committer) close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.in)
	}
	c.mu.Unlock()
	<-c.done
	return nil
}

func (c *committer) run() {
	defer close(c.done)
	batch := make([]*entry, 0, c.maxBatch)
	grabs := make([]sale.Grab, 0, c.maxBatch)
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
		grabs = grabs[:0]
		for _, e := range batch {
			grabs = append(grabs, e.grab)
		}
		err := c.journal.AppendGrabs(context.Background(), grabs)
		for _, e := range batch {
			e.err <- err
		}
		if err == nil {
			c.committed()
		}
	}
}
