package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"

	"seckill/internal/auth"
)

// Sale describes one benchmarked sale: the activity bench creates and the crowd it sends.
type Sale struct {
	Crowd
	Kind         string // "item" or "redpacket"
	Stock        int64  // units, or red-packet shares
	TotalCents   int64  // red packets: the amount split
	PerUserLimit int64
	Secret       string        // the server's JWT secret: bench mints its users' tokens
	DrainTimeout time.Duration // how long to wait for the queue to drain after the crowd
	// Progress, when set, shows a progress bar there (a terminal).
	Progress io.Writer
	// Fault, when set, is injected while the crowd runs.
	Fault *Fault
}

// Fault is a failure injected while the crowd runs.
type Fault struct {
	Kind string  // what fails, for the report ("api", "worker")
	At   float64 // when: the fraction of the clicks answered, in (0, 1)
	// Inject makes the failure and returns once the system is back (a restarted node listens).
	Inject func(ctx context.Context) error
}

// FaultReport is what happened to the fault.
type FaultReport struct {
	Kind      string  `json:"kind"`
	AtS       float64 `json:"at_s"`       // seconds after the crowd began
	RecoveryS float64 `json:"recovery_s"` // from the failure until the system was back
}

// MaxStock is the largest stock bench asks for (the server's own limit).
const MaxStock = 10_000_000

// Validate reports a sale that cannot run, before any request is sent.
func (s Sale) Validate() error {
	if err := s.Crowd.Validate(); err != nil {
		return err
	}
	switch {
	case s.Kind != "item" && s.Kind != "redpacket":
		return fmt.Errorf("--kind %q: want item or redpacket", s.Kind)
	case s.Stock < 1 || s.Stock > MaxStock:
		return fmt.Errorf("--stock %d: want 1 to %d", s.Stock, MaxStock)
	case s.PerUserLimit < 1:
		return fmt.Errorf("--per-user-limit %d: want at least 1", s.PerUserLimit)
	case s.Kind == "redpacket" && s.TotalCents < s.Stock:
		return fmt.Errorf("--total-cents %d: a red packet of %d shares needs at least %d cents", s.TotalCents, s.Stock, s.Stock)
	case s.DrainTimeout <= 0:
		return errors.New("the drain timeout must be positive")
	case s.Fault != nil && (s.Fault.At <= 0 || s.Fault.At >= 1):
		return fmt.Errorf("--at %g%%: want between 0 and 100, exclusive", 100*s.Fault.At)
	}
	if _, err := auth.New([]byte(s.Secret)); err != nil {
		return fmt.Errorf("--jwt-secret: %w", err)
	}
	return nil
}

// Run creates the activity, sends the crowd, waits for the queue to drain and checks the sale.
// The error is for a run that could not be made (bad input, a server that is not there); a run
// that found violations returns them in the result.
func (s Sale) Run(ctx context.Context, c *Client) (Result, []Record, error) {
	if err := s.Validate(); err != nil {
		return Result{}, nil, err
	}
	tokens, _ := auth.New([]byte(s.Secret))
	bearer := func(i int) string {
		t, err := tokens.Mint(s.User(i), time.Now(), time.Hour)
		if err != nil {
			panic(err) // Validate checked the secret; user ids are ours
		}
		return t
	}
	if err := c.Health(ctx); err != nil {
		return Result{}, nil, err
	}
	if err := c.CheckUserToken(ctx, bearer(0)); err != nil {
		return Result{}, nil, err
	}
	now := time.Now().UTC()
	spec := ActivitySpec{Name: fmt.Sprintf("bench seed %d", s.Seed), Kind: s.Kind, PriceCents: 100,
		PerUserLimit: s.PerUserLimit, StartAt: now.Add(-time.Second).Format(time.RFC3339),
		EndAt: now.Add(s.Ramp + time.Hour).Format(time.RFC3339), PayWindowS: 900}
	if s.Kind == "redpacket" {
		spec.Count, spec.TotalCents, spec.PriceCents = &s.Stock, s.TotalCents, 0
	} else {
		spec.Stock = &s.Stock
	}
	id, err := c.CreateActivity(ctx, spec)
	if err != nil {
		return Result{}, nil, err
	}

	var answered atomic.Int64
	var faults sync.WaitGroup
	var report *FaultReport
	var faultErr error
	began := time.Now()
	trigger := int64(-1)
	if s.Fault != nil {
		trigger = max(int64(s.Fault.At*float64(s.Users*(1+s.Dup))), 1)
	}
	stopBar := s.progress(&answered)
	history := Run(ctx, c, id, s.Crowd, bearer, func() {
		if answered.Add(1) == trigger {
			faults.Go(func() { report, faultErr = s.inject(ctx, began) })
		}
	})
	stopBar()
	faults.Wait()
	if err := ctx.Err(); err != nil {
		return Result{}, history, fmt.Errorf("the crowd was stopped: %w", err)
	}
	if faultErr != nil {
		return Result{}, history, faultErr
	}

	if err := s.drain(ctx, c, id); err != nil {
		return Result{}, history, err
	}
	facts, err := s.facts(ctx, c, id, history, bearer)
	if err != nil {
		return Result{}, history, err
	}
	v := Check(history, facts)
	return Result{Verdict: v, Load: Summarize(history), OK: v.OK(), Activity: id, Fault: report}, history, nil
}

// inject makes the fault and times it.
func (s Sale) inject(ctx context.Context, began time.Time) (*FaultReport, error) {
	at := time.Now()
	if err := s.Fault.Inject(ctx); err != nil {
		return nil, fmt.Errorf("inject the %s fault: %w", s.Fault.Kind, err)
	}
	return &FaultReport{Kind: s.Fault.Kind, AtS: at.Sub(began).Seconds(), RecoveryS: time.Since(at).Seconds()}, nil
}

// progress shows answered/total on s.Progress until the returned stop is called.
func (s Sale) progress(answered *atomic.Int64) (stop func()) {
	if s.Progress == nil {
		return func() {}
	}
	bar := progressbar.NewOptions64(int64(s.Users*(1+s.Dup)), progressbar.OptionSetWriter(s.Progress),
		progressbar.OptionSetDescription("grabs"), progressbar.OptionShowCount(), progressbar.OptionShowIts(),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				bar.Set64(answered.Load())
				bar.Finish()
				return
			case <-t.C:
				bar.Set64(answered.Load())
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// drain waits until the server's queue holds none of the activity's grabs.
func (s Sale) drain(ctx context.Context, c *Client, id string) error {
	deadline := time.Now().Add(s.DrainTimeout)
	for {
		st, err := c.Stats(ctx, id)
		if err == nil && st.PendingQueue == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the queue did not drain in %s (pending %d, last error %v)", s.DrainTimeout, st.PendingQueue, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// facts reads back, as each winner, the order of every acknowledged grab, and the counters.
func (s Sale) facts(ctx context.Context, c *Client, id string, history []Record, bearer func(int) string) (Facts, error) {
	f := Facts{Stock: s.Stock, PerUserLimit: s.PerUserLimit, Kind: s.Kind, TotalCents: s.TotalCents,
		Orders: map[string]Order{}}
	userIndex := map[string]int{}
	for i := range s.Users {
		userIndex[s.User(i)] = i
	}
	type ask struct{ token, user string }
	asks := make(chan ask)
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for range min(s.Concurrency, 32) {
		wg.Go(func() {
			for a := range asks {
				o, err := c.Order(ctx, a.token, bearer(userIndex[a.user]))
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				f.Orders[a.token] = o
				mu.Unlock()
			}
		})
	}
	seen := map[string]bool{}
	for _, r := range history {
		if r.Outcome == Won && r.Token != "" && !seen[r.Token] {
			seen[r.Token] = true
			asks <- ask{r.Token, r.User}
		}
	}
	close(asks)
	wg.Wait()
	if firstErr != nil {
		return Facts{}, fmt.Errorf("read the orders back: %w", firstErr)
	}
	st, err := c.Stats(ctx, id)
	if err != nil {
		return Facts{}, err
	}
	f.Stats = st
	return f, nil
}
