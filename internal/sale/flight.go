package sale

import (
	"context"
	"sync"
)

// flights runs one call per key at a time: the callers that ask while it runs wait for it and
// share its result. (golang.org/x/sync/singleflight does the same; the domain keeps to the
// standard library.)
type flights struct {
	mu    sync.Mutex
	calls map[string]*flight
}

type flight struct {
	done chan struct{}
	err  error
}

// do calls fn unless a call of key is running, in which case it waits for that one's result or
// for ctx to end. fn is not given ctx: a caller hanging up must not fail the others' call.
func (f *flights) do(ctx context.Context, key string, fn func() error) error {
	f.mu.Lock()
	if c, ok := f.calls[key]; ok {
		f.mu.Unlock()
		select {
		case <-c.done:
			return c.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if f.calls == nil {
		f.calls = map[string]*flight{}
	}
	c := &flight{done: make(chan struct{})}
	f.calls[key] = c
	f.mu.Unlock()

	defer func() {
		f.mu.Lock()
		delete(f.calls, key)
		f.mu.Unlock()
		close(c.done)
	}()
	c.err = fn()
	return c.err
}
