// Package worker runs the sale's background loops: the consumer that turns queued grabs into
// orders, and the sweeper that closes payment windows.
package worker

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"seckill/internal/sale"
)

// Worker turns queued grabs into orders. Placing is idempotent per grab token, so a delivery
// repeated after a crash (placed but not yet acknowledged) changes nothing.
type Worker struct {
	Queue sale.Queue
	Store sale.Store
	Log   *slog.Logger
	Batch int // grabs per transaction

	// Placed, when set, is called with every batch placed (tests and metrics).
	Placed func([]sale.Placement)
}

// Run consumes until ctx ends. A batch in progress is finished first: its orders are placed and
// acknowledged even though ctx has ended, so shutting down never strands a half-done batch.
func (w *Worker) Run(ctx context.Context) error {
	batch := w.Batch
	if batch <= 0 {
		batch = 256
	}
	for {
		ds, err := w.Queue.Receive(ctx, batch)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			w.Log.Error("receive grabs", "err", err)
			sleep(ctx, time.Second)
			continue
		}
		w.process(ctx, ds)
	}
}

// process places and acknowledges ds, retrying with backoff while the database is unavailable.
// The calls themselves are not cancelled by ctx; only the retrying stops when it ends, leaving
// the grabs in the queue for the next start.
func (w *Worker) process(ctx context.Context, ds []sale.Delivery) {
	call := context.WithoutCancel(ctx)
	grabs := make([]sale.Grab, len(ds))
	for i, d := range ds {
		grabs[i] = d.Grab
	}
	var placed []sale.Placement
	retry(ctx, w.Log, "place orders", func() (err error) {
		placed, err = w.Store.PlaceOrders(call, grabs)
		return err
	})
	if len(placed) == 0 {
		return // gave up: shutting down with the database away
	}
	for _, p := range placed {
		if p.New && p.Order.Status == sale.StatusFailed {
			w.Log.Warn("database refused a grab", "token", p.Order.Token, "activity", p.Order.ActivityID,
				"user", p.Order.UserID, "reason", p.Order.Reason)
		}
	}
	if w.Placed != nil {
		w.Placed(placed)
	}
	retry(ctx, w.Log, "ack grabs", func() error { return w.Queue.Ack(call, ds) })
}

// retry calls fn until it succeeds or ctx ends, backing off from 50 ms to 5 s between tries.
func retry(ctx context.Context, log *slog.Logger, what string, fn func() error) {
	wait := 50 * time.Millisecond
	for {
		err := fn()
		if err == nil {
			return
		}
		log.Error(what, "err", err, "retry_in", wait)
		if !sleep(ctx, wait) {
			return
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// sleep waits d or until ctx ends; it reports whether the full wait elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Sweeper closes expired payment windows: every Every it cancels the expired orders, and the
// service restocks each exactly once however many sweepers run.
type Sweeper struct {
	Service *sale.Service
	Log     *slog.Logger
	Every   time.Duration
	Batch   int
}

// Run sweeps until ctx ends.
func (s *Sweeper) Run(ctx context.Context) error {
	batch := s.Batch
	if batch <= 0 {
		batch = 256
	}
	for sleep(ctx, s.Every) {
		for {
			n, err := s.Service.SweepExpired(ctx, batch)
			if err != nil && !errors.Is(err, context.Canceled) {
				s.Log.Error("sweep expired orders", "err", err)
			}
			if n > 0 {
				s.Log.Info("cancelled expired orders", "count", n)
			}
			if err != nil || n < batch {
				break
			}
		}
	}
	return nil
}
