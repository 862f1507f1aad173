package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"seckill/internal/auth"
	"seckill/internal/httpapi/wire"
	"seckill/internal/sale"
)

// Nemesis is a run of `seckill bench --nemesis SEED --duration D` (issue 39): for D a crowd buys
// from several activities at once (an item that never sells out, a scarce item, a sharded one on
// a Cluster, a red packet) — it grabs, retries what got no answer or BUSY with the same
// Idempotency-Key, pays, cancels — while an operator adds stock, renames and ends activities,
// and the nemesis strikes the deployment by the schedule the seed draws (Schedule). Every
// request, change, strike and heal is streamed to the history file as it completes; after the
// last heal and the drain, the checker reads the file back and holds each activity to the
// sale's invariants (Check) and the deployment to its availability (Availability).
type Nemesis struct {
	Seed        uint64
	Duration    time.Duration
	Rate        int    // clicks a second, spread evenly over Duration, each sent at its due time (see crowd)
	Concurrency int    // connections opened ahead of the crowd, and the checker's reads at once
	Secret      string // the servers' JWT secret: bench mints the users' tokens
	Topology    Topology
	// StockShards, above 1, adds an item whose stock is split into that many counters (a
	// Cluster's masters).
	StockShards  int64
	DrainTimeout time.Duration
	// Strike makes a strike of the schedule, on activity's part of the deployment where it has
	// one (the master of its slot), and returns how to heal it: heal returns once the struck part
	// is back (a node listens again, a server takes writes).
	Strike func(ctx context.Context, s Strike, activity string) (heal func(context.Context) error, err error)
	// History is the file the history is streamed to, and read back from by the checker.
	History string
	// Provider, when set (--payments), is where the buyers who pay do so: a simulated provider
	// whose notices come on time, late, twice or after a forged one, each sent again until a node
	// takes it, and the shop's webhook receiver. The checker adds that every payment is kept or
	// owed back (and refunded once, where the server refunds by itself) and that every order's
	// events arrived, once each and in order. PayWindow is then the activities' payment window
	// (the Provider's Window); unpaid orders expire within the run.
	Provider  *Provider
	PayWindow time.Duration
	// Meter, when set, reads the CPU time of bench and the deployment's processes: each sample
	// of the machine in the history then says what each role used of it.
	Meter Meter
}

// Limits of a nemesis run.
const (
	MaxNemesisRate = 5_000
	maxAttempts    = 8 // a click and its retries
	// cancelsUntil is the share of the run after which nobody cancels: a unit given back in the
	// crowd's last moments might find no buyer, which the checker would call undersold.
	cancelsUntil = 0.7
	// The buyers' choices after a win: pay, cancel, or leave the order to its window.
	payShare, cancelShare = 0.5, 0.15
)

// Validate reports a run that cannot be made.
func (n Nemesis) Validate() error {
	switch {
	case n.Rate < 1 || n.Rate > MaxNemesisRate:
		return fmt.Errorf("--rate %d: want 1 to %d clicks a second", n.Rate, MaxNemesisRate)
	case n.Concurrency < 1 || n.Concurrency > MaxConcurrency:
		return fmt.Errorf("--concurrency %d: want 1 to %d", n.Concurrency, MaxConcurrency)
	case n.Duration > MaxRamp:
		return fmt.Errorf("--duration %s: want at most %s", n.Duration, MaxRamp)
	case n.DrainTimeout <= 0:
		return errors.New("the drain timeout must be positive")
	case n.Strike == nil:
		return errors.New("the nemesis has no way to strike: it needs the deployment bench started")
	case n.History == "":
		return errors.New("the nemesis streams its history to a file: none named")
	case n.Provider != nil && n.PayWindow < time.Second:
		return errors.New("the nemesis's payments need the activities' payment window (--pay-window, at least 1s)")
	}
	if _, err := Schedule(n.Seed, n.Duration, n.Topology); err != nil {
		return err
	}
	_, err := auth.New([]byte(n.Secret), time.Now)
	return err
}

// NemesisResult is what a nemesis run found.
type NemesisResult struct {
	Seed       uint64           `json:"seed"`
	DurationS  float64          `json:"duration_s"`
	Topology   Topology         `json:"topology"`
	Requests   int64            `json:"requests"` // the history's lines but the machine's samples
	Strikes    []StrikeReport   `json:"strikes"`
	Activities []ActivityResult `json:"activities"`
	// Availability holds the deployment to its promise after each heal (see Availability).
	Availability AvailabilityReport `json:"availability"`
	// StockOff counts the activities whose stock is not what the operator's changes made it.
	StockOff int64 `json:"stock_off"`
	// Payments is what the provider and the webhook receiver saw, with --payments.
	Payments *PaymentsReport `json:"payments,omitempty"`
	Problems []string        `json:"problems,omitempty"`
	OK       bool            `json:"ok"`
	History  string          `json:"history"`
	// Replay is the command that runs the same schedule and crowd again (set by the caller).
	Replay string `json:"replay,omitempty"`
}

// StrikeReport is one strike as it went.
type StrikeReport struct {
	Strike
	Activity  string  `json:"activity,omitempty"`
	AtS       float64 `json:"at_s"`       // when it struck, seconds after the crowd began
	RecoveryS float64 `json:"recovery_s"` // from the heal's start until the struck part was back
}

// ActivityResult is one activity's verdict, and a waiting line's report.
type ActivityResult struct {
	ID      string      `json:"id"`
	Name    string      `json:"name"`
	Verdict Verdict     `json:"verdict"`
	Line    *LineReport `json:"line,omitempty"`
}

// OK reports whether the activity kept the sale's invariants, and its line the line's.
func (a ActivityResult) OK() bool { return a.Verdict.OK() && (a.Line == nil || a.Line.OK()) }

// nemesisSale is one activity of a nemesis run.
type nemesisSale struct {
	name   string
	spec   wire.CreateActivityRequest
	weight int // its share of the clicks
	id     string
	// drained are its counters once the queue held none of its grabs (after the run).
	drained wire.StatsResponse
}

// sales are the run's activities: "plenty" has a unit for every click, so that a 202 tells, at
// any moment, that the deployment sells; the others run out and test the stock. "line" is a
// waiting line (admission queue): its clicks join, the line admits them first come, first served,
// and its winners' orders keep the default window, so that no unit comes back to sell out of turn.
func (n Nemesis) sales(start time.Time, clicks int64) []*nemesisSale {
	item := func(name string, stock, limit, shards int64) wire.CreateActivityRequest {
		return wire.CreateActivityRequest{Name: name, Kind: "item", PriceCents: 100, Stock: &stock, PerUserLimit: &limit,
			StartAt: start.Format(time.RFC3339), EndAt: start.Add(n.Duration + time.Hour).Format(time.RFC3339), StockShards: shards}
	}
	shares, one := int64(80), int64(1)
	packet := wire.CreateActivityRequest{Name: "nemesis packet", Kind: "redpacket", Count: &shares, TotalCents: 100 * shares,
		PerUserLimit: &one, StartAt: start.Format(time.RFC3339), EndAt: start.Add(n.Duration + time.Hour).Format(time.RFC3339)}
	var window *int64
	if n.PayWindow > 0 {
		w := int64(n.PayWindow / time.Second)
		window = &w
	}
	out := []*nemesisSale{
		{name: "plenty", spec: item("nemesis plenty", clicks+1, 1, 0), weight: 40},
		{name: "scarce", spec: item("nemesis scarce", 60, 2, 0), weight: 20},
		{name: "packet", spec: packet, weight: 20},
	}
	if n.StockShards > 1 {
		out = append(out, &nemesisSale{name: "sharded", spec: item("nemesis sharded", 90, 1, n.StockShards), weight: 20})
	}
	for _, s := range out {
		s.spec.PayWindowS = window
	}
	line := item("nemesis line", 40, 1, 0)
	line.Admission = AdmitQueue
	return append(out, &nemesisSale{name: "line", spec: line, weight: 15})
}

// operatorChanges are the operator's changes of a nemesis run: stock added to the scarce item
// twice, the packet renamed, then ended, each through the next node.
var operatorChanges = []struct {
	at   float64 // share of the run
	sale string
	ch   Change
}{
	{0.25, "scarce", Change{Kind: "add", Add: 10}},
	{0.4, "packet", Change{Kind: "rename"}},
	{0.55, "scarce", Change{Kind: "add", Add: 10}},
	{0.85, "packet", Change{Kind: "end"}},
}

// Run makes the run. The error is for a run that could not be made (a server that is not there,
// a strike or a heal that failed, a queue that did not drain); violations are in the result.
func (n Nemesis) Run(ctx context.Context, c *Client) (NemesisResult, error) {
	if err := n.Validate(); err != nil {
		return NemesisResult{}, err
	}
	schedule, _ := Schedule(n.Seed, n.Duration, n.Topology)
	res := NemesisResult{Seed: n.Seed, DurationS: n.Duration.Seconds(), Topology: n.Topology, History: n.History}
	clicks := int64(n.Duration.Seconds() * float64(n.Rate))
	users := max(int(clicks/3), 50)
	crowd := Crowd{Users: users, Seed: n.Seed, UserPrefix: fmt.Sprintf("nemesis-%d-", n.Seed)}
	tokens := Sale{Crowd: crowd, Secret: n.Secret}.bearers(ctx)
	index := make(map[string]int, users)
	for i := range users {
		index[crowd.User(i)] = i
	}
	bearer := func(u string) string { return tokens(index[u]) }
	if err := c.Health(ctx); err != nil {
		return res, err
	}
	if err := c.CheckUserToken(ctx, tokens(0)); err != nil {
		return res, err
	}
	sales := n.sales(time.Now().UTC().Add(-time.Second), clicks)
	for _, s := range sales {
		id, err := c.CreateActivity(ctx, s.spec)
		if err != nil {
			return res, err
		}
		s.id = id
	}

	f, err := os.Create(n.History)
	if err != nil {
		return res, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	h := NewHistoryWriter(f)
	began := time.Now()
	if n.Provider != nil {
		n.Provider.SetLateUntil(began.Add(time.Duration(n.lastLeave() * float64(n.Duration))))
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	var strikeErr error
	var strikeMu sync.Mutex
	parts := map[string]*sync.Mutex{}
	for _, s := range schedule {
		if parts[partOf(s)] == nil {
			parts[partOf(s)] = &sync.Mutex{}
		}
	}
	for k, s := range schedule {
		activity := sales[k%len(sales)].id
		wg.Go(func() {
			rep, err := n.strike(runCtx, h, began, s, activity, parts[partOf(s)])
			strikeMu.Lock()
			defer strikeMu.Unlock()
			res.Strikes = append(res.Strikes, rep)
			if err != nil && strikeErr == nil {
				strikeErr = err
				stop() // a strike that could not be made or healed: the run is not what the seed says
			}
		})
	}
	var ops sync.WaitGroup
	machineCtx, stopMachine := context.WithCancel(runCtx)
	ops.Go(func() { sampleMachine(machineCtx, h, machineEvery, n.Meter) })
	ops.Go(func() { n.operate(runCtx, c, h, began, sales) })
	n.crowd(runCtx, c, h, began, clicks, crowd, sales, bearer)
	wg.Wait()
	stopMachine() // the last heal is done: what the machine does after it judges nothing
	ops.Wait()
	if strikeErr == nil && ctx.Err() == nil && n.Provider != nil {
		if err := n.mopUp(ctx, c, h, clicks, crowd, sales, bearer); err != nil {
			return res, err
		}
	}
	if err := h.Flush(); err != nil {
		return res, fmt.Errorf("history: %w", err)
	}
	if strikeErr != nil {
		return res, strikeErr
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("the run was stopped: %w", err)
	}
	sort.Slice(res.Strikes, func(i, j int) bool { return res.Strikes[i].At < res.Strikes[j].At })
	if n.Provider != nil {
		// Every notice made (or given up on) before the orders are read: a payment taken is then
		// PAID, or owed back.
		if err := n.Provider.Wait(ctx); err != nil {
			return res, err
		}
	}

	for _, s := range sales {
		if s.drained, err = drained(ctx, c, s.id, n.DrainTimeout); err != nil {
			return res, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	if _, err := f.Seek(0, 0); err != nil {
		return res, err
	}
	history, err := ReadHistory(f)
	if err != nil {
		return res, err
	}
	for _, r := range history {
		if r.Op != OpMachine {
			res.Requests++
		}
	}
	var pay PaymentsReport
	for _, s := range sales {
		a, problems, err := n.check(ctx, c, s, history, bearer, &pay)
		if err != nil {
			return res, err
		}
		res.Activities = append(res.Activities, a)
		for _, p := range problems {
			res.Problems = append(res.Problems, s.name+": "+p)
			res.StockOff++
		}
	}
	if n.Provider != nil {
		res.Payments = &pay
		if pay.Unsigned > 0 {
			res.Problems = append(res.Problems, fmt.Sprintf("events: %d webhook posts failed their signature", pay.Unsigned))
		}
	}
	res.Availability = Availability(history)
	res.judge()
	return res, nil
}

// judge sets r.OK from the checks: every activity's invariants and line, its stock's
// linearizability decided (a check not made is not passed), the stock's changes, availability
// and the webhook's signatures; an undecided check is named among the problems.
func (r *NemesisResult) judge() {
	r.OK = r.StockOff == 0 && r.Availability.OK() && (r.Payments == nil || r.Payments.Unsigned == 0)
	for _, a := range r.Activities {
		r.OK = r.OK && a.OK()
		if l := a.Verdict.Linear; l != nil && l.Result == LinearUnknown {
			r.OK = false
			r.Problems = append(r.Problems, fmt.Sprintf("%s: linearizability undecided: the search of %d operations outran its %s",
				a.Name, l.Ops, LinearBudget))
		}
	}
}

// strike makes s at its time, holds it, heals it, and records both in h. It holds part, the
// struck part's lock, from the strike to the end of the heal: the schedule lets a part be struck
// again once its last strike's hold is over, but a heal takes its own time (a node restarting, a
// replica taking over), and a strike on a part still healing would find it gone (a restarting
// node's clock to skew): it waits, and starts late.
func (n Nemesis) strike(ctx context.Context, h *HistoryWriter, began time.Time, s Strike, activity string, part *sync.Mutex) (StrikeReport, error) {
	rep := StrikeReport{Strike: s, Activity: activity}
	if !sleepUntil(ctx, began.Add(s.At)) {
		return rep, nil
	}
	part.Lock()
	defer part.Unlock()
	if ctx.Err() != nil {
		return rep, nil
	}
	detail := fmt.Sprintf("%s %d", s.Kind, s.Target)
	if s.Skew != 0 {
		detail += fmt.Sprintf(" %+v", s.Skew) // "skew-api 1 +350ms"
	}
	start := time.Now()
	heal, err := n.Strike(ctx, s, activity)
	rec := Record{Op: OpStrike, Activity: activity, Detail: detail, Start: start.UnixMicro(), End: time.Now().UnixMicro()}
	rep.AtS = start.Sub(began).Seconds()
	if err != nil {
		rec.Err = err.Error()
		h.Add(rec)
		return rep, fmt.Errorf("strike %s at %s: %w", detail, s.At, err)
	}
	h.Add(rec)
	sleepUntil(ctx, start.Add(s.Hold)) // healed even when the run is stopped: never leave a server down
	hs := time.Now()
	err = heal(context.WithoutCancel(ctx))
	rec = Record{Op: OpHeal, Activity: activity, Detail: detail, Start: hs.UnixMicro(), End: time.Now().UnixMicro()}
	rep.RecoveryS = time.Since(hs).Seconds()
	if err != nil {
		rec.Err = err.Error()
		h.Add(rec)
		return rep, fmt.Errorf("heal %s: %w", detail, err)
	}
	h.Add(rec)
	return rep, nil
}

// operate makes the operator's changes at their times, each through the next node.
func (n Nemesis) operate(ctx context.Context, c *Client, h *HistoryWriter, began time.Time, sales []*nemesisSale) {
	for i, oc := range operatorChanges {
		if !sleepUntil(ctx, began.Add(time.Duration(oc.at*float64(n.Duration)))) {
			return
		}
		var s *nemesisSale
		for _, x := range sales {
			if x.name == oc.sale {
				s = x
			}
		}
		ch := oc.ch
		ch.Node = i
		start := time.Now()
		status, err := c.change(ctx, ch, s.id, i)
		detail := ch.Kind
		if ch.Kind == "add" {
			detail = fmt.Sprint("add ", ch.Add)
		}
		rec := Record{Op: OpChange, Activity: s.id, Detail: detail, Start: start.UnixMicro(),
			End: time.Now().UnixMicro(), Status: status}
		describe(&rec, err)
		h.Add(rec)
	}
}

// describe puts err, the answer to an operator's change or a buyer's payment, into rec.
func describe(rec *Record, err error) {
	if err == nil {
		return
	}
	rec.Status, rec.Err = 0, err.Error()
	var ae *apiError
	if errors.As(err, &ae) {
		rec.Status, rec.Code = ae.Status, ae.Code
	}
}

// crowd sends the clicks, click i due at began + i/Rate, each drawn from the seed and i: its user,
// its activity, and what its buyer does with a win. Each click is its own buyer's, sent at its
// due time however many of the crowd's clicks are still waiting for an answer, as a crowd of
// independent users clicks: a node that holds its clicks unanswered (stopped, or waiting on a
// dependency) holds those buyers, not the crowd (Sentinel seed 176: the 64 clicks of a crowd of
// 64 workers all held by one stopped node, nothing was sent for 3 s, and the heal after it could
// not be seen). Concurrency is the connections opened ahead of it.
func (n Nemesis) crowd(ctx context.Context, c *Client, h *HistoryWriter, began time.Time, clicks int64, crowd Crowd,
	sales []*nemesisSale, bearer func(string) string) {
	total := 0
	for _, s := range sales {
		total += s.weight
	}
	c.Open(ctx, n.Concurrency)
	var buyers sync.WaitGroup
	defer buyers.Wait()
	for i := range clicks {
		if !sleepUntil(ctx, began.Add(time.Duration(int64(n.Duration)*i/clicks))) {
			return
		}
		r := rand.New(rand.NewPCG(n.Seed, uint64(i)))
		user := crowd.User(r.IntN(crowd.Users))
		w := r.IntN(total)
		var s *nemesisSale
		for _, x := range sales {
			if w -= x.weight; w < 0 {
				s = x
				break
			}
		}
		choice, progress := r.Float64(), float64(i)/float64(clicks)
		buyers.Go(func() {
			if won := n.click(ctx, c, h, int(i), s.id, user, bearer(user)); won != "" {
				n.afterWin(ctx, c, h, s.id, user, bearer(user), won, choice, progress)
			}
		})
	}
}

// click is one buyer's click: sent again after a refusal that decided nothing (BUSY, no answer,
// a server error, no node up) with the same key, after the answer's Retry-After. It returns the
// order token of a win, "" otherwise.
func (n Nemesis) click(ctx context.Context, c *Client, h *HistoryWriter, i int, activity, user, bearer string) string {
	key := fmt.Sprintf("nemesis-%d-%d", n.Seed, i)
	var rec Record
	for attempt := range maxAttempts {
		if attempt > 0 {
			pause := max(time.Duration(rec.RetryAfter)*time.Second, 250*time.Millisecond)
			if !sleepUntil(ctx, time.Now().Add(min(pause, 2*time.Second))) {
				return ""
			}
		}
		rec = c.GrabKeyed(ctx, i, activity, user, bearer, key)
		rec.Activity, rec.Intended = activity, rec.Start
		if rec.Ticket != "" {
			rec.Outcome = Joined // a place in a line, no unit yet
		}
		h.Add(rec)
		if !refusal(rec) {
			break
		}
	}
	if rec.Outcome != Won {
		return ""
	}
	return rec.Token
}

// mopUp sells again, once every payment window of the run has closed (--payments), the units
// that came back after the crowd: orders left unpaid, paid late, or never paid because a strike
// struck their buyer's page. Users of the crowd click each item that sells out (not plenty) as a
// crowd that outlasted the windows would, each click numbered after the crowd's (a key of its
// own) and recorded, and each winner pays at once. Without it, a unit given back in the run's
// last seconds would be counted undersold, through nobody's fault.
func (n Nemesis) mopUp(ctx context.Context, c *Client, h *HistoryWriter, clicks int64, crowd Crowd, sales []*nemesisSale,
	bearer func(string) string) error {
	if err := n.Provider.Wait(ctx); err != nil {
		return err
	}
	if !sleepUntil(ctx, time.Now().Add(n.PayWindow+onTimeMargin)) {
		return ctx.Err()
	}
	next := int(clicks)
	for _, s := range sales {
		if s.spec.Kind != "item" || s.name == "plenty" || s.spec.Admission == AdmitQueue {
			continue // plenty never sells out; the packet is ended by then; the line gives nothing back
		}
		for range mopRounds {
			st, err := c.Stats(ctx, s.id)
			if err == nil && st.Remaining == 0 {
				break
			}
			for range max(2*st.Remaining, 10) {
				user := crowd.User(next % crowd.Users)
				if won := n.click(ctx, c, h, next, s.id, user, bearer(user)); won != "" {
					n.afterWin(ctx, c, h, s.id, user, bearer(user), won, 0, 0) // pays, at once
				}
				next++
			}
			if !sleepUntil(ctx, time.Now().Add(250*time.Millisecond)) {
				return ctx.Err()
			}
		}
	}
	return n.Provider.Wait(ctx)
}

// mopRounds bounds the mop-up's rounds of clicks per item: a node's sold-out flag, not yet told
// of a unit given back, answers SOLD_OUT for up to 5 s.
const mopRounds = 40

// afterWin is what the buyer of order token does, as choice draws: pay it, cancel it (not in the
// run's last part, progress past cancelsUntil), or leave it to its window; a page pays or
// cancels once the order is placed.
func (n Nemesis) afterWin(ctx context.Context, c *Client, h *HistoryWriter, activity, user, bearer, token string, choice, progress float64) {
	paying, cancelling := choice < payShare, choice < payShare+cancelShare && progress < cancelsUntil
	if n.Provider != nil && !paying && !cancelling && progress >= n.lastLeave() {
		paying = true // left now, the order would expire once the crowd is over, its unit unsold
	}
	if !paying && !cancelling || !placed(ctx, c, token, bearer) {
		return
	}
	op := Record{Activity: activity, User: user, Token: token, Start: time.Now().UnixMicro(), Status: http.StatusOK}
	var err error
	switch {
	case paying && n.Provider != nil:
		op.Op = OpPay
		var pay *wire.PaymentResponse
		if pay, err = c.StartPayment(ctx, token, bearer); err == nil {
			err = n.Provider.Pay(ctx, pay)
		}
	case paying:
		op.Op = OpPay
		_, err = c.Pay(ctx, token, bearer)
	default:
		op.Op = OpCancel
		err = c.Cancel(ctx, token, bearer)
	}
	op.End = time.Now().UnixMicro()
	describe(&op, err)
	h.Add(op)
}

// onTimeMargin is how long before its window's end a payment's notice counts as surely on time:
// the sweeper's second, and two clocks skewed the most the deployment bears, the granting node's
// behind and the sweeper's ahead (MaxClockSkew; docs/operating.md, "Clocks").
const onTimeMargin = time.Second + 2*MaxClockSkew

// lastLeave is the share of the run after which, with payment windows that close within it
// (--payments), no order is left unpaid nor paid late: like a cancel after cancelsUntil, its unit
// would come back once nobody is left to buy it.
func (n Nemesis) lastLeave() float64 {
	return max(cancelsUntil-n.PayWindow.Seconds()/n.Duration.Seconds(), 0)
}

// placed waits, as a buyer's page does, until the order of a grab won is placed (the worker has
// taken it from the queue), for up to placedWithin; false when it was not.
func placed(ctx context.Context, c *Client, token, bearer string) bool {
	deadline := time.Now().Add(placedWithin)
	for {
		o, err := c.Order(ctx, token, bearer)
		if err == nil && o.Found && o.Status != sale.StatusPending {
			return true
		}
		if time.Now().After(deadline) || !sleepUntil(ctx, time.Now().Add(200*time.Millisecond)) {
			return false
		}
	}
}

// placedWithin bounds a buyer's wait for their order before paying or cancelling it.
const placedWithin = 10 * time.Second

// check holds activity s to the sale's invariants over its part of history, its stock to the
// operator's changes (at least the stock the changes answered 200 added, at most that and the
// changes that got no answer) and to linearizability (CheckStock), and a line to the line's
// invariants (judgeLine), its tickets' answers standing for its grabs.
func (n Nemesis) check(ctx context.Context, c *Client, s *nemesisSale, history []Record, bearer func(string) string, pay *PaymentsReport) (ActivityResult, []string, error) {
	res := ActivityResult{ID: s.id, Name: s.name}
	var grabs, records []Record
	paid, cancelled, unanswered := map[string]bool{}, map[string]bool{}, map[string]bool{}
	var added, unknown, ended int64
	endMade := false
	for _, r := range history {
		if r.Activity != s.id {
			continue
		}
		if r.Op != OpStrike && r.Op != OpHeal {
			records = append(records, r)
		}
		switch r.Op {
		case "":
			grabs = append(grabs, r)
		case OpPay:
			paid[r.Token] = r.Status == http.StatusOK
		case OpCancel:
			cancelled[r.Token] = r.Status == http.StatusOK
			unanswered[r.Token] = r.Status == 0 || r.Status >= http.StatusInternalServerError
		case OpChange:
			var add int64
			fmt.Sscanf(r.Detail, "add %d", &add)
			switch {
			case made(r.Status) && add > 0:
				added += add
			case r.Status == 0 || r.Status >= 500:
				unknown += add
			}
			if made(r.Status) && r.Detail == "end" {
				endMade = true
				if r.Status == http.StatusOK {
					ended = r.End // a pending end (202) promises nothing of when
				}
			}
		}
	}
	if s.spec.Admission == AdmitQueue {
		tickets := map[string]string{} // user -> the first ticket acknowledged
		for _, r := range grabs {
			if _, ok := tickets[r.User]; r.Ticket != "" && !ok {
				tickets[r.User] = r.Ticket
			}
		}
		if err := waitLine(ctx, c, s.id, n.DrainTimeout); err != nil {
			return res, nil, fmt.Errorf("%s: %w", s.name, err)
		}
		res.Line = &LineReport{Admission: AdmitQueue, Tickets: int64(len(tickets))}
		var err error
		if grabs, err = judgeLine(ctx, c, s.id, deref(s.spec.Stock), n.Concurrency, grabs, tickets, bearer, res.Line); err != nil {
			return res, nil, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	orders, err := readOrders(ctx, c, n.Concurrency, grabs, bearer)
	if err != nil {
		return res, nil, fmt.Errorf("%s: %w", s.name, err)
	}
	st := s.drained
	initial := deref(s.spec.Stock) + deref(s.spec.Count) // an item's units or a packet's shares
	var problems []string
	if got := st.Stock - initial; got < added || got > added+unknown {
		problems = append(problems, fmt.Sprintf("stock: %d units were added, the operator's changes answered %d added and %d unknown",
			got, added, unknown))
	}
	f := Facts{Stock: st.Stock, PerUserLimit: *s.spec.PerUserLimit, Kind: s.spec.Kind, TotalCents: s.spec.TotalCents,
		Orders: orders, Stats: st, Paid: onlyTrue(paid), Cancelled: onlyTrue(cancelled), CancelUnanswered: onlyTrue(unanswered),
		Ended: ended, EndMade: endMade}
	if s.spec.Kind == "redpacket" {
		if f.Board, err = c.Board(ctx, s.id, 100); err != nil {
			return res, nil, err
		}
	}
	if n.Provider != nil {
		r, err := n.settle(ctx, c, &f, grabs, bearer)
		if err != nil {
			return res, nil, fmt.Errorf("%s: %w", s.name, err)
		}
		pay.add(r)
	}
	res.Verdict = Check(grabs, f)
	if res.Line == nil { // a line's clicks are joins: the line, not they, take the units
		window := wire.DefaultPayWindowS * time.Second
		if s.spec.PayWindowS != nil {
			window = time.Duration(*s.spec.PayWindowS) * time.Second
		}
		res.Verdict.holdLinear(CheckStock(records, StockFacts{Initial: initial, PayWindow: window, Orders: orders}, LinearBudget))
	}
	return res, problems, nil
}

// settle holds the activity's payments to what the provider did: a payment whose notice the
// server took before its order's window could have closed must have kept the order (Paid); any
// other must be kept or owed back (Late). The window opens at the grab, which is no earlier than
// the first send of its key; a notice taken within onTimeMargin of its close is counted late, as
// the sweeper, or a skewed clock, may have closed it first. Then Sale.settle waits for the late
// notices, the refunds and the events, and reads what became of each payment.
func (n Nemesis) settle(ctx context.Context, c *Client, f *Facts, grabs []Record, bearer func(string) string) (PaymentsReport, error) {
	if err := n.Provider.Wait(ctx); err != nil {
		return PaymentsReport{}, err
	}
	first, owner := map[string]int64{}, map[string]string{} // a key's first send; a token's buyer
	for _, g := range grabs {
		if at, ok := first[g.Key]; !ok || g.Start < at {
			first[g.Key] = g.Start
		}
	}
	opened := map[string]time.Time{} // the earliest a won order's window can have opened
	for _, g := range grabs {
		if g.Outcome == Won && g.Token != "" {
			opened[g.Token], owner[g.Token] = time.UnixMicro(first[g.Key]), g.User
		}
	}
	taken := n.Provider.Taken()
	f.Paid, f.Late = map[string]bool{}, map[string]bool{}
	for tok := range n.Provider.tokens(func(*payment) bool { return true }) {
		if _, ours := f.Orders[tok]; !ours {
			continue
		}
		if t, ok := taken[tok]; ok && t.Before(opened[tok].Add(n.PayWindow-onTimeMargin)) {
			f.Paid[tok] = true
		} else {
			f.Late[tok] = true
		}
	}
	reread := func(ctx context.Context, tok string) (Order, error) { return c.Order(ctx, tok, bearer(owner[tok])) }
	r, err := (Sale{Provider: n.Provider, DrainTimeout: n.DrainTimeout}).settle(ctx, f, reread)
	f.Unsigned = 0 // the receiver's, not an activity's: counted once, in Run
	return r, err
}

// onlyTrue returns the keys of m whose value is true.
func onlyTrue(m map[string]bool) map[string]bool {
	out := map[string]bool{}
	for k, v := range m {
		if v {
			out[k] = true
		}
	}
	return out
}

// sleepUntil waits until t; false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// WriteJSON writes the result as one line of JSON.
func (r NemesisResult) WriteJSON(w io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// WriteText writes the result for a reader: the strikes, each activity's verdict, availability.
func (r NemesisResult) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "nemesis seed %d, %.0f s on %d API nodes, %d workers, redis %q, db %q; %d requests\n",
		r.Seed, r.DurationS, r.Topology.APINodes, r.Topology.Workers, r.Topology.Redis, r.Topology.DB, r.Requests)
	for _, s := range r.Strikes {
		fmt.Fprintf(&b, "  %6.2f s  %-17s target %d, held %.1f s, back in %.3f s\n", s.AtS, s.Kind, s.Target, s.Hold.Seconds(), s.RecoveryS)
	}
	for _, a := range r.Activities {
		v := a.Verdict
		fmt.Fprintf(&b, "%-8s %6d requests, %4d wins of %4d stock, ok %v (oversell %d, undersell %d, duplicates %d, lost %d, unreleased %d, shares off %d, board off %d, after end %d)\n",
			a.Name, v.Requests, v.Wins, v.Stock, a.OK(), v.Oversell, v.Undersell, v.Duplicates, v.Lost, v.Unreleased, v.SharesOff, v.BoardOff, v.AfterEnd)
		if l := v.Linear; l != nil {
			fmt.Fprintf(&b, "         linearizable: %s (%d operations, %.3f s)\n", l.Result, l.Ops, l.Seconds)
		}
		if l := a.Line; l != nil {
			fmt.Fprintf(&b, "         line: %d tickets, %d won (%d more unseen), %d refused QUEUE_FULL; unanswered %d, lost %d, out of order %d, winners off %d\n",
				l.Tickets, l.Winners, l.Unseen, l.QueueFull, l.Unanswered, l.Lost, l.OutOfOrder, l.WinnersOff)
		}
		for _, p := range v.Problems {
			fmt.Fprintf(&b, "    %s\n", p)
		}
		if a.Line != nil {
			for _, p := range a.Line.Problems {
				fmt.Fprintf(&b, "    line: %s\n", p)
			}
		}
	}
	a := r.Availability
	fmt.Fprintf(&b, "availability: %d heals checked, %d late, %d nodes refusing after the grace, worst first 202 %.3f s after a heal\n",
		a.Heals, a.Late, a.Refusing, a.WorstS)
	for _, p := range append(a.Problems, r.Problems...) {
		fmt.Fprintf(&b, "    %s\n", p)
	}
	fmt.Fprintf(&b, "ok %v; history %s\n", r.OK, r.History)
	if !r.OK {
		fmt.Fprintf(&b, "replay: %s\n", r.Replay)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
