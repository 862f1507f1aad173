package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"

	"seckill/internal/auth"
	"seckill/internal/httpapi/wire"
	"seckill/internal/sale"
)

// Sale describes one benchmarked sale: the activity bench creates and the crowd it sends.
type Sale struct {
	Crowd
	Kind         string // "item" or "redpacket"
	Stock        int64  // units, or red-packet shares
	TotalCents   int64  // red packets: the amount split
	PerUserLimit int64
	StockShards  int64         // Redis Cluster counters the item's stock is split into (0: the server's default, 1)
	Secret       string        // the server's JWT secret: bench mints its users' tokens
	DrainTimeout time.Duration // how long to wait for the queue to drain after the crowd
	// Progress, when set, shows a progress bar there (a terminal).
	Progress io.Writer
	// Fault, when set, is injected while the crowd runs.
	Fault *Fault
	// Operator, when set, changes the sale while the crowd runs (see Operator).
	Operator *Operator
	// Unpaid is the share of the winners who never pay: their orders expire after PayWindow
	// and their units go back on sale, and the users who lost then try again.
	Unpaid    float64
	PayWindow time.Duration // the activity's payment window; 0: the server's default (15 min)
	// Line makes the sale a queue or lottery: the crowd joins its waiting line (see LineSpec).
	Line LineSpec
	// Reservation is a reservation sale's reservations and waves (Line.Admission reservation).
	Reservation ReservationSpec
	// Meter, when set, reads the CPU time of the servers: the result says what each role used.
	Meter Meter
	// Provider, when set, is the payment provider the server sends its buyers to, and the
	// receiver of its webhooks: the winners who pay (see Unpaid) pay there, and the checker
	// adds that every payment is kept or refunded and every order's events arrived in order.
	Provider *Provider
}

// MaxUnpaidWindow bounds the payment window of a run with unpaid orders: bench waits it out.
const MaxUnpaidWindow = 10 * time.Minute

// Fault is a failure injected while the crowd runs.
type Fault struct {
	Kind string  // what fails, for the report ("api", "worker", "redis-failover", ...)
	At   float64 // when: the fraction of the clicks answered, in (0, 1)
	// Inject makes the failure to the sale of activity and returns once the system is back (a
	// restarted node listens, a replica took over, a slot moved, a link was healed).
	Inject func(ctx context.Context, activity string) error
}

// FaultReport is what happened to the fault, and to the sale through it.
type FaultReport struct {
	Kind      string  `json:"kind"`
	AtS       float64 `json:"at_s"`       // seconds after the crowd began
	RecoveryS float64 `json:"recovery_s"` // from the failure until Inject said the system was back
	// OutageS is the longest the sale went without a grab answered 202, from the failure to the
	// crowd's end: for a fault that stops the sale, from the fault to the first win after it
	// (grabs in flight when it struck can win first; they do not shorten it); for one that slows
	// it, the widest gap it left. Null when nothing won after the failure (the stock was gone).
	OutageS *float64 `json:"outage_s"`
	// Busy counts the crowd's answers 503 BUSY; BusyShare is their share of the crowd's requests.
	Busy      int     `json:"busy"`
	BusyShare float64 `json:"busy_share"`
	at        time.Time
}

// measure fills in what the history says of the sale through the fault.
func (f *FaultReport) measure(history []Record) {
	from := f.at.UnixMicro()
	var wins []int64
	var failedUntil int64 // the last answer that was a failure (BUSY, no answer)
	for _, r := range history {
		if r.Status == 503 {
			f.Busy++
		}
		switch {
		case r.Outcome == Won && r.End >= from:
			wins = append(wins, r.End)
		case r.Outcome == Error && r.End >= from:
			failedUntil = max(failedUntil, r.End)
		}
	}
	if len(history) > 0 {
		f.BusyShare = float64(f.Busy) / float64(len(history))
	}
	if len(wins) == 0 {
		return
	}
	slices.Sort(wins)
	widest, last := int64(0), from
	for _, w := range wins {
		widest, last = max(widest, w-last), w
	}
	// Failures after the last win (a sale that never came back) are an outage too.
	widest = max(widest, failedUntil-last)
	s := float64(widest) / 1e6
	f.OutageS = &s
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
	case s.Unpaid < 0 || s.Unpaid > 1:
		return fmt.Errorf("--unpaid %g: want a share between 0 and 1", s.Unpaid)
	case s.PayWindow < 0 || s.PayWindow > 0 && s.PayWindow < time.Second:
		return fmt.Errorf("--pay-window %s: want at least 1s", s.PayWindow)
	case s.Unpaid > 0 && (s.PayWindow == 0 || s.PayWindow > MaxUnpaidWindow):
		return fmt.Errorf("--unpaid needs a --pay-window of 1s to %s: bench waits for the unpaid orders to expire", MaxUnpaidWindow)
	case s.Fault != nil && (s.Fault.At <= 0 || s.Fault.At >= 1):
		return fmt.Errorf("--at %g%%: want between 0 and 100, exclusive", 100*s.Fault.At)
	}
	if err := s.Line.Validate(); err != nil {
		return err
	}
	if s.Provider != nil && (s.Unpaid == 0 || s.Fault != nil || s.Line.Lined()) {
		return errors.New("--payments needs --unpaid (and --pay-window), and no fault or line: the winners pay at the provider")
	}
	if o := s.Operator; o != nil {
		if err := o.Validate(); err != nil {
			return err
		}
		if s.Unpaid > 0 || s.Provider != nil || s.Line.Lined() || s.Kind != "item" {
			return errors.New("--operator changes an item's direct sale: no --unpaid, --payments, line or red packet")
		}
	}
	if s.Line.Admission == AdmitReservation {
		if err := s.Reservation.Validate(s.Users); err != nil {
			return err
		}
		if s.Unpaid > 0 || s.Provider != nil || s.Fault != nil || s.Operator != nil {
			return errors.New("--admission reservation runs the crowd at each wave: no --unpaid, --payments, fault or --operator")
		}
		// The crowd clicks again at every opening: an order that expired meanwhile would let its
		// buyer win again, beyond the limit the checker holds every run's wins to.
		if span := time.Duration(s.Reservation.Waves-1)*s.Reservation.WaveInterval + reservationSlack; s.PayWindow > 0 && s.PayWindow < span {
			return fmt.Errorf("--pay-window %s: a reservation run's orders must outlive its waves, at least %s (the waves' span and %s)", s.PayWindow, span, reservationSlack)
		}
	} else if s.Reservation != (ReservationSpec{}) {
		return errors.New("--reserved, --waves, --wave-interval and --show are for --admission reservation")
	}
	if s.Line.Lined() && (s.Unpaid > 0 || s.Fault != nil) {
		return errors.New("--unpaid and faults are for direct admission; the line's faults are tested by TestKillNineThe*")
	}
	if _, err := auth.New([]byte(s.Secret), time.Now); err != nil {
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
	bearer := s.bearers(ctx)
	if err := c.Health(ctx); err != nil {
		return Result{}, nil, err
	}
	if err := c.CheckUserToken(ctx, bearer(0)); err != nil {
		return Result{}, nil, err
	}
	if s.Line.Lined() {
		return s.runLine(ctx, c, bearer)
	}
	if s.Line.Admission == AdmitReservation {
		return s.runReservation(ctx, c, bearer)
	}
	now := time.Now().UTC()
	id, err := c.CreateActivity(ctx, s.spec(fmt.Sprintf("bench seed %d", s.Seed), now.Add(-time.Second)))
	if err != nil {
		return Result{}, nil, err
	}

	var answered atomic.Int64
	var faults sync.WaitGroup
	var report *FaultReport
	var faultErr error
	began := time.Now()
	clicks := int64(s.Users * (1 + s.Dup))
	trigger := int64(-1)
	if s.Fault != nil {
		trigger = max(int64(s.Fault.At*float64(clicks)), 1)
	}
	var operator *OperatorReport
	var changes []chan struct{}
	var changeAt []int64
	opCtx, stopOperator := context.WithCancel(ctx)
	defer stopOperator()
	if o := s.Operator; o != nil {
		for _, ch := range o.Steps {
			changes, changeAt = append(changes, make(chan struct{})), append(changeAt, max(int64(ch.At*float64(clicks)), 1))
		}
		faults.Go(func() { operator = o.operate(opCtx, c, id, began, changes) })
	}
	stopBar := s.progress(&answered)
	cpuStart := s.meter()
	history := Run(ctx, c, id, s.Crowd, s.Clicks(), bearer, func() {
		n := answered.Add(1)
		if n == trigger {
			faults.Go(func() { report, faultErr = s.inject(ctx, id, began) })
		}
		for i, at := range changeAt {
			if n == at {
				close(changes[i])
			}
		}
	})
	stopBar()
	stopOperator() // a change whose clicks never came (the crowd stopped short) is not made
	faults.Wait()
	if err := ctx.Err(); err != nil {
		return Result{}, history, fmt.Errorf("the crowd was stopped: %w", err)
	}
	if faultErr != nil {
		return Result{}, history, faultErr
	}

	crowdEnd, cpuCrowd := time.Now(), s.meter()
	if err := s.drain(ctx, c, id); err != nil {
		return Result{}, history, err
	}
	drained, cpuDrained := time.Since(crowdEnd), s.meter()
	crowd := len(history) // the flash crowd; the figures are about it, not about a second wave
	if report != nil {
		report.measure(history)
	}
	if operator != nil {
		operator.measure(history)
	}
	var paid, unpaid, late map[string]bool
	if s.Unpaid > 0 {
		var again []Record
		if paid, unpaid, late, again, err = s.restock(ctx, c, id, history, bearer); err != nil {
			return Result{}, history, err
		}
		history = append(history, again...)
		if err := s.drain(ctx, c, id); err != nil {
			return Result{}, history, err
		}
	}
	facts, err := s.facts(ctx, c, id, history, bearer)
	if err != nil {
		return Result{}, history, err
	}
	facts.Paid, facts.Unpaid, facts.Late = paid, unpaid, late
	if operator != nil {
		facts.Stock += operator.Added
		facts.Ended, facts.EndMade, facts.ChangesFailed = operator.Ended, operator.EndMade, operator.failed()
	}
	var payments *PaymentsReport
	if s.Provider != nil {
		index, owner := map[string]int{}, map[string]string{}
		for i := range s.Users {
			index[s.User(i)] = i
		}
		for _, r := range history {
			if r.Outcome == Won && r.Token != "" {
				owner[r.Token] = r.User
			}
		}
		reread := func(ctx context.Context, tok string) (Order, error) {
			return c.Order(ctx, tok, bearer(index[owner[tok]]))
		}
		r, err := s.settle(ctx, &facts, reread)
		if err != nil {
			return Result{}, history, err
		}
		payments = &r
	}
	v := Check(history, facts)
	return Result{Verdict: v, Load: Summarize(history[:crowd]), OK: v.OK(), Activity: id, Fault: report, Operator: operator,
		DrainS: drained.Seconds(), CPU: cpuOf(cpuStart, cpuCrowd, cpuDrained), Payments: payments}, history, nil
}

// meter reads s.Meter, if there is one.
func (s Sale) meter() []Usage {
	if s.Meter == nil {
		return nil
	}
	return s.Meter()
}

// bearers mints every user's token before the crowd, on all cores, and returns user i's: the
// crowd's clicks carry tokens their users hold already, as a real crowd's do (an identity
// provider mints a token at login, not a click), so that the load generator does not spend on
// signing what it measures the server spending on verifying. The tokens outlive the run: an hour,
// or ctx's deadline and a minute when that is later.
func (s Sale) bearers(ctx context.Context) func(int) string {
	tokens, _ := auth.New([]byte(s.Secret), time.Now)
	now, ttl := time.Now(), time.Hour
	if d, ok := ctx.Deadline(); ok {
		ttl = max(ttl, time.Until(d)+time.Minute)
	}
	mint := func(i int) string {
		t, err := tokens.Mint(s.User(i), now, ttl)
		if err != nil {
			panic(err) // Validate checked the secret; user ids are ours
		}
		return t
	}
	minted := make([]string, s.Users)
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(minted); i += workers {
				minted[i] = mint(i)
			}
		})
	}
	wg.Wait()
	return func(i int) string {
		if i >= 0 && i < len(minted) {
			return minted[i]
		}
		return mint(i)
	}
}

// spec is the activity the run creates, starting at start.
func (s Sale) spec(name string, start time.Time) wire.CreateActivityRequest {
	window := int64(900)
	if s.PayWindow > 0 {
		window = int64((s.PayWindow + time.Second - 1) / time.Second)
	}
	spec := wire.CreateActivityRequest{Name: name, Kind: s.Kind, PriceCents: 100, PerUserLimit: &s.PerUserLimit,
		StartAt: start.Format(time.RFC3339), EndAt: start.Add(s.Ramp + time.Hour).Format(time.RFC3339),
		PayWindowS: &window, StockShards: s.StockShards}
	if s.Kind == "redpacket" {
		spec.Count, spec.TotalCents, spec.PriceCents = &s.Stock, s.TotalCents, 0
	} else {
		spec.Stock = &s.Stock
	}
	if s.Line.Lined() {
		spec.Admission, spec.AdmitRate, spec.QueueCap = s.Line.Admission, s.Line.AdmitRate, s.Line.QueueCap
	}
	return spec
}

// restock settles the first wave: the winners pay, except a share Unpaid of them drawn from the
// seed (and any whose window closed before bench got to them). Once the server has cancelled the
// unpaid orders and put their units back, the users who won nothing click once more, so that
// those units are sold again. It returns the orders paid and left unpaid, and the new clicks.
//
// With a provider the winners who pay are sent to its checkout page; those it calls back after
// the window are returned as late (their orders are cancelled, then refunded).
func (s Sale) restock(ctx context.Context, c *Client, id string, history []Record, bearer func(int) string) (paid, unpaid, late map[string]bool, again []Record, err error) {
	index := make(map[string]int, s.Users)
	for i := range s.Users {
		index[s.User(i)] = i
	}
	r := rand.New(rand.NewPCG(s.Seed, 0x0bad9a1d))
	paid, unpaid = map[string]bool{}, map[string]bool{}
	winners := map[string]bool{}
	type bill struct{ token, user string }
	var bills []bill
	for _, rec := range history {
		if rec.Outcome != Won || rec.Token == "" || paid[rec.Token] || unpaid[rec.Token] {
			continue
		}
		winners[rec.User] = true
		if r.Float64() < s.Unpaid {
			unpaid[rec.Token] = true
		} else {
			paid[rec.Token] = true // until the server says otherwise
			bills = append(bills, bill{rec.Token, rec.User})
		}
	}
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	work := make(chan bill)
	for range min(s.Concurrency, 32) {
		wg.Go(func() {
			for b := range work {
				var err error
				if s.Provider == nil {
					_, err = c.Pay(ctx, b.token, bearer(index[b.user]))
				} else {
					var pay *wire.PaymentResponse
					if pay, err = c.StartPayment(ctx, b.token, bearer(index[b.user])); err == nil {
						err = s.Provider.Pay(ctx, pay)
					}
				}
				var ae *apiError
				mu.Lock()
				switch {
				case errors.As(err, &ae) && ae.Status == http.StatusConflict:
					delete(paid, b.token) // its window closed first: it must be cancelled like the others
					unpaid[b.token] = true
				case err != nil && firstErr == nil:
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	for _, b := range bills {
		work <- b
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return nil, nil, nil, nil, firstErr
	}
	late = map[string]bool{}
	if s.Provider != nil {
		for tok := range s.Provider.Late() {
			delete(paid, tok)
			late[tok] = true
		}
	}

	deadline := time.Now().Add(s.PayWindow + s.DrainTimeout)
	for {
		st, err := c.Stats(ctx, id)
		if err == nil && st.Cancelled+st.RefundPending+st.Refunded >= int64(len(unpaid)+len(late)) {
			break
		}
		if time.Now().After(deadline) {
			return nil, nil, nil, nil, fmt.Errorf("%d orders were left unpaid; the server cancelled %d within their window and %s (last error %v)",
				len(unpaid)+len(late), st.Cancelled+st.RefundPending+st.Refunded, s.DrainTimeout, err)
		}
		select {
		case <-ctx.Done():
			return nil, nil, nil, nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}

	var losers []int32
	for i := range s.Users {
		if !winners[s.User(i)] {
			losers = append(losers, int32(i))
		}
	}
	burst := s.Crowd
	burst.Ramp = 0
	return paid, unpaid, late, Run(ctx, c, id, burst, s.Shuffled(losers, 1), bearer, nil), nil
}

// settle waits for the provider's last callbacks and for the receiver to hear every order's
// events (the relay delivers them after the changes, within the drain timeout), then reads what
// became of the payments into f.
func (s Sale) settle(ctx context.Context, f *Facts, reread func(ctx context.Context, token string) (Order, error)) (PaymentsReport, error) {
	if err := s.Provider.Wait(ctx); err != nil {
		return PaymentsReport{}, err
	}
	// The late notices changed their orders after facts read them: read them again, until none
	// is owed back still where the server refunds by itself (its refunds' relay asks the
	// provider, within the drain timeout).
	_, refunding := s.Provider.proto.refunds()
	deadline := time.Now().Add(s.DrainTimeout)
	for {
		owed := 0
		for tok := range f.Late {
			o, err := reread(ctx, tok)
			if err != nil {
				return PaymentsReport{}, err
			}
			f.Orders[tok] = o
			owed += btoi(o.Status == sale.StatusRefundPending)
		}
		if !refunding || owed == 0 || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return PaymentsReport{}, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	deadline = time.Now().Add(s.DrainTimeout)
	for {
		events := s.Provider.Events()
		complete := true
		for tok, o := range f.Orders {
			status, moved := f.Moved[tok]
			if !moved {
				status = o.Status
			}
			if len(events[tok]) > len(eventsOf(status, f.Cancelled[tok])) {
				// More events than the order's status says: it moved on since it was read (an
				// unpaid order's window closed meanwhile). Its events are held to what it is now.
				now, err := reread(ctx, tok)
				if err != nil {
					return PaymentsReport{}, err
				}
				if now.Status != status {
					if f.Moved == nil {
						f.Moved = map[string]sale.Status{}
					}
					f.Moved[tok], status = now.Status, now.Status
				}
			}
			if len(events[tok]) < len(eventsOf(status, f.Cancelled[tok])) {
				complete = false
				break
			}
		}
		if complete || time.Now().After(deadline) {
			f.Events = events
			break
		}
		select {
		case <-ctx.Done():
			return PaymentsReport{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	r, facts, refunds := s.Provider.report(f.Orders)
	f.Payments, f.Unsigned, f.Refunds = facts, r.Unsigned, refunds
	return r, nil
}

// inject makes the fault and times it.
func (s Sale) inject(ctx context.Context, activity string, began time.Time) (*FaultReport, error) {
	at := time.Now()
	if err := s.Fault.Inject(ctx, activity); err != nil {
		return nil, fmt.Errorf("inject the %s fault: %w", s.Fault.Kind, err)
	}
	return &FaultReport{Kind: s.Fault.Kind, AtS: at.Sub(began).Seconds(), RecoveryS: time.Since(at).Seconds(), at: at}, nil
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
	_, err := drained(ctx, c, id, s.DrainTimeout)
	return err
}

// drained waits, for up to timeout, until the server answers an activity's counters whole (a
// node whose database just came back sheds them while its breaker probes) with none of its
// grabs left in the queue, and returns those counters.
func drained(ctx context.Context, c *Client, id string, timeout time.Duration) (wire.StatsResponse, error) {
	deadline := time.Now().Add(timeout)
	for {
		st, err := c.Stats(ctx, id)
		if err == nil && st.PendingQueue == 0 {
			return st, nil
		}
		if time.Now().After(deadline) {
			return st, fmt.Errorf("the queue did not drain in %s (pending %d, last error %v)", timeout, st.PendingQueue, err)
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// facts reads back, as each winner, the order of every acknowledged grab, and the counters.
func (s Sale) facts(ctx context.Context, c *Client, id string, history []Record, bearer func(int) string) (Facts, error) {
	f := Facts{Stock: s.Stock, PerUserLimit: s.PerUserLimit, Kind: s.Kind, TotalCents: s.TotalCents}
	userIndex := map[string]int{}
	for i := range s.Users {
		userIndex[s.User(i)] = i
	}
	var err error
	f.Orders, err = readOrders(ctx, c, s.Concurrency, history, func(u string) string { return bearer(userIndex[u]) })
	if err != nil {
		return Facts{}, err
	}
	st, err := c.Stats(ctx, id)
	if err != nil {
		return Facts{}, err
	}
	f.Stats = st
	if s.Kind == "redpacket" {
		if f.Board, err = c.Board(ctx, id, 100); err != nil {
			return Facts{}, err
		}
	}
	return f, nil
}

// readOrders reads back, as each winner (bearer gives a user's token), the order of every grab
// of history answered won, from up to conc requests at once (at most 32).
func readOrders(ctx context.Context, c *Client, conc int, history []Record, bearer func(user string) string) (map[string]Order, error) {
	orders := map[string]Order{}
	type ask struct{ token, user string }
	asks := make(chan ask)
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for range min(conc, 32) {
		wg.Go(func() {
			for a := range asks {
				o, err := c.Order(ctx, a.token, bearer(a.user))
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				orders[a.token] = o
				mu.Unlock()
			}
		})
	}
	seen := map[string]bool{}
	for _, r := range history {
		if r.isGrab() && r.Outcome == Won && r.Token != "" && !seen[r.Token] {
			seen[r.Token] = true
			asks <- ask{r.Token, r.User}
		}
	}
	close(asks)
	wg.Wait()
	if firstErr != nil {
		return nil, fmt.Errorf("read the orders back: %w", firstErr)
	}
	return orders, nil
}
