// Package worker runs the sale's background loops: the consumer that turns queued grabs into
// orders, and the sweeper that closes payment windows.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"seckill/internal/sale"
)

// Worker turns queued grabs into orders. Placing is idempotent per grab token, so a delivery
// repeated after a crash (placed but not yet acknowledged) changes nothing.
type Worker struct {
	Queue sale.Consumer
	Store sale.Placer
	Log   *slog.Logger
	Batch int // grabs per transaction
	// Linger is how long the worker waits after a batch that was not full before it reads
	// again, so that under a steady crowd the grabs gather into full batches: one transaction
	// and one acknowledgement for many orders rather than for a handful. Zero reads at once.
	Linger time.Duration
	// MaxDeliveries is how many deliveries of one grab the worker tries before it gives up on it
	// (a grab that keeps killing the workers that take it): the grab goes to the dead letters.
	MaxDeliveries int

	// Placed, when set, is called with every batch placed (tests and metrics); Buried with how
	// many grabs went to the dead letters.
	Placed func([]sale.Placement)
	Buried func(n int)
}

// Run consumes until ctx ends. A batch in progress is finished first: its orders are placed and
// acknowledged even though ctx has ended, so shutting down never strands a half-done batch.
func (w *Worker) Run(ctx context.Context) error {
	batch := w.Batch
	if batch <= 0 {
		batch = 256
	}
	pause, logged := time.Duration(0), time.Time{}
	for ctx.Err() == nil {
		ds, err := w.Queue.Receive(ctx, batch)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			// The queue's backend is away (down, or failing over): try again soon, as a failover
			// ends when nobody can tell, and say so once every few seconds, not at every try.
			pause = min(max(2*pause, receiveFirstPause), receiveMaxPause)
			if time.Since(logged) >= receiveLogEvery {
				w.Log.Error("receive grabs", "err", err, "retry_in", pause)
				logged = time.Now()
			}
			sleep(ctx, pause)
			continue
		}
		pause = 0
		w.process(ctx, ds)
		if len(ds) < batch && w.Linger > 0 {
			sleep(ctx, w.Linger)
		}
	}
	return nil
}

// The pauses of the worker after a failed receive, and how often it logs them.
const (
	receiveFirstPause = 50 * time.Millisecond
	receiveMaxPause   = time.Second
	receiveLogEvery   = 5 * time.Second
)

// process places and acknowledges ds, retrying with backoff while the database is unavailable.
// The calls themselves are not cancelled by ctx; only the retrying stops when it ends, leaving
// the grabs in the queue for the next start. A grab the database can never place (its activity
// does not exist, a value does not fit) goes to the dead letters, and the others of its batch
// are placed: one bad grab never stalls the queue behind it.
func (w *Worker) process(ctx context.Context, ds []sale.Delivery) {
	call := context.WithoutCancel(ctx)
	ds = w.buryPoison(ctx, call, ds)
	if len(ds) == 0 {
		return
	}
	traces := follow(ds)
	defer traces.end()
	placed, unplaceable, ok := w.place(ctx, call, ds, traces)
	if !ok {
		return // gave up: shutting down with the database away
	}
	for _, p := range placed {
		if p.New && p.Order.Status == sale.StatusFailed {
			w.Log.Warn("database refused a grab", "token", p.Order.Token, "activity", p.Order.ActivityID,
				"user", p.Order.UserID, "reason", p.Order.Reason)
		}
	}
	if w.Placed != nil && len(placed) > 0 {
		w.Placed(placed)
	}
	if len(unplaceable) > 0 {
		w.bury(ctx, call, unplaceable, "the database can never place it as an order")
		ds = slices.DeleteFunc(ds, func(d sale.Delivery) bool {
			return slices.ContainsFunc(unplaceable, func(u sale.Delivery) bool { return u.ID == d.ID })
		})
	}
	if len(ds) > 0 {
		retry(ctx, w.Log, "ack grabs", func() error { return w.Queue.Ack(call, ds) })
	}
}

// place places ds, retrying while the database is away. A batch the database refuses as
// unplaceable is split in halves until the grabs it refuses are alone: those are returned apart,
// the placements of the others with them. ok is false when ctx ended first.
func (w *Worker) place(ctx, call context.Context, ds []sale.Delivery, traces followed) (placed []sale.Placement, unplaceable []sale.Delivery, ok bool) {
	grabs := make([]sale.Grab, len(ds))
	for i, d := range ds {
		grabs[i] = d.Grab
	}
	var refused error
	retry(ctx, w.Log, "place orders", func() (err error) {
		start := time.Now()
		placed, err = w.Store.PlaceOrders(call, grabs)
		traces.wrote(start, len(grabs), err)
		if errors.Is(err, sale.ErrUnplaceable) {
			refused = err
			return nil // no retry can help: find the grab
		}
		return err
	})
	switch {
	case refused == nil && len(placed) == 0:
		return nil, nil, false
	case refused == nil:
		return placed, nil, true
	case len(ds) == 1:
		w.Log.Error("unplaceable grab", "token", ds[0].Grab.Token, "activity", ds[0].Grab.ActivityID,
			"user", ds[0].Grab.UserID, "err", refused)
		return nil, ds, true
	}
	mid := len(ds) / 2
	for _, half := range [][]sale.Delivery{ds[:mid], ds[mid:]} {
		p, u, ok := w.place(ctx, call, half, nil)
		if !ok {
			return nil, nil, false
		}
		placed, unplaceable = append(placed, p...), append(unplaceable, u...)
	}
	return placed, unplaceable, true
}

// buryPoison sends the deliveries past MaxDeliveries to the dead letters (the database's table
// and the queue's dead-letter stream) and returns the others.
func (w *Worker) buryPoison(ctx, call context.Context, ds []sale.Delivery) []sale.Delivery {
	max := w.MaxDeliveries
	if max <= 0 {
		max = 5
	}
	var keep, poison []sale.Delivery
	for _, d := range ds {
		if d.Attempts > max {
			poison = append(poison, d)
		} else {
			keep = append(keep, d)
		}
	}
	if len(poison) > 0 {
		w.bury(ctx, call, poison, fmt.Sprintf("delivered %d times or more without being placed", max+1))
	}
	return keep
}

// bury records ds as dead letters, in the database's table and the queue's dead-letter stream.
func (w *Worker) bury(ctx, call context.Context, ds []sale.Delivery, reason string) {
	for _, d := range ds {
		w.Log.Error("dead letter", "token", d.Grab.Token, "activity", d.Grab.ActivityID, "user", d.Grab.UserID,
			"attempts", d.Attempts, "reason", reason)
		retry(ctx, w.Log, "record dead letter", func() error {
			return w.Store.DeadLetter(call, d.Grab, d.Attempts, reason, time.Now())
		})
	}
	retry(ctx, w.Log, "bury dead letters", func() error { return w.Queue.Bury(call, ds, reason) })
	if w.Buried != nil {
		w.Buried(len(ds))
	}
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
// service restocks each exactly once however many sweepers run; then it gives back the units
// still owed by cancels whose restock failed.
type Sweeper struct {
	Service *sale.Service
	Log     *slog.Logger
	Every   time.Duration
	Batch   int
	// Expired, when set, is told how many orders each sweep cancelled (metrics).
	Expired func(n int)
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
				if s.Expired != nil {
					s.Expired(n)
				}
			}
			if err != nil || n < batch {
				break
			}
		}
		// The units of cancels whose restock failed (the gate was away): given back now.
		if n, err := s.Service.ReleaseOwed(ctx, batch); err != nil && !errors.Is(err, context.Canceled) {
			s.Log.Error("give back owed restocks", "err", err)
		} else if n > 0 {
			s.Log.Info("gave back owed restocks", "count", n)
		}
		// The revisions an operator made while the gate was away (stock added, a sale ended).
		if n, err := s.Service.ReviseOwed(ctx, batch); err != nil && !errors.Is(err, context.Canceled) {
			s.Log.Error("give the gate owed revisions", "err", err)
		} else if n > 0 {
			s.Log.Info("gave the gate owed revisions", "count", n)
		}
	}
	return nil
}
