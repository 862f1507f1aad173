// Package capacity sizes a deployment for a sale from what seckill bench measured: the CPU time
// an API node spends on a losing and on a winning grab, the busiest Redis master on a grab, a
// worker and the database on an order. It reads the bench's result lines (docs/bench/results.jsonl)
// and prints how many nodes of each kind, how many Redis masters, whether to shard the hot item,
// what write rate reaches the database and which rate limits to set (seckill plan, and
// docs/CAPACITY.md, which explains the model).
package capacity

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"seckill/internal/bench"
)

// Costs are CPU seconds per unit of work, measured by one or two bench runs.
type Costs struct {
	Loss float64 `json:"api_loss_cpu_s"` // an API node answering a grab that does not win
	Win  float64 `json:"api_win_cpu_s"`  // an API node answering a winning grab
	// Grab is the busiest Redis master's, per winning grab: the master that holds the item.
	// RedisAll is every Redis process's together (replicas and the users' rate-limit buckets
	// on other masters included).
	Grab     float64 `json:"redis_grab_cpu_s"`
	RedisAll float64 `json:"redis_all_cpu_s"`
	Place    float64 `json:"worker_order_cpu_s"` // a worker node placing an order
	Write    float64 `json:"db_order_cpu_s"`     // the database writing it
	// OrdersPerS is the rate one worker node placed the all-win run's orders at, from the
	// crowd's start until the queue was empty: on the bench's machine, not a ceiling.
	OrdersPerS float64 `json:"orders_per_s"`
	// The runs the figures come from (the scenario names of their result lines), and the
	// setup and machine of the last all-win one.
	FlashRuns  []string     `json:"flash_runs"`
	AllWinRuns []string     `json:"allwin_runs"`
	Setup      *bench.Setup `json:"setup"`
	Machine    string       `json:"machine"`
}

// Run is a result line as scripts/bench/run.sh writes it: bench's result with the scenario's
// name and the machine's cores.
type Run struct {
	bench.Result
	Scenario string `json:"scenario"`
	Machine  string `json:"machine"`
}

// ReadRuns reads result lines, one JSON object each; blank lines are skipped.
func ReadRuns(r io.Reader) ([]Run, error) {
	var runs []Run
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var run Run
		if err := json.Unmarshal(line, &run); err != nil {
			return nil, fmt.Errorf("result line %d: %w", n, err)
		}
		runs = append(runs, run)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	return runs, nil
}

// ErrNoRun is returned by CostsOf when the results hold no run it can measure a cost from.
var ErrNoRun = errors.New("no usable bench run")

// CostsOf takes the costs from the clean runs of the results measured with minReplicas
// replicas acknowledging each grab: all-win runs (every request a win) for the cost of a win,
// a grab and an order, flash runs (the stock at most a quarter of the requests) for the cost of
// a loss. Each cost is the median of the runs' (figures on shared cores move by a fifth from
// run to run). A run is clean when the checker passed, nothing was struck, every request was
// answered and bench ran the API and the worker as processes of their own
// (--spawn N --workers M) on Redis: only then are their CPU times apart.
func CostsOf(runs []Run, minReplicas int) (Costs, error) {
	var flash, allwin []*Run
	for i := range runs {
		r := &runs[i]
		switch {
		case !measurable(r, minReplicas):
		case r.Wins == r.Requests && r.Wins > 0:
			allwin = append(allwin, r)
		case r.Wins > 0 && r.Wins*4 <= r.Requests:
			flash = append(flash, r)
		}
	}
	if len(allwin) == 0 || len(flash) == 0 {
		return Costs{}, fmt.Errorf("%w with --min-replicas %d: want a clean all-win run and a clean flash run of seckill bench --redis ... --spawn N --workers M --json (scripts/bench/run.sh capacity-); found %d all-win, %d flash",
			ErrNoRun, minReplicas, len(allwin), len(flash))
	}
	per := func(runs []*Run, f func(*Run) float64) float64 {
		xs := make([]float64, len(runs))
		for i, r := range runs {
			xs[i] = f(r)
		}
		return median(xs)
	}
	perWin := func(role string, of func(bench.RoleCPU) float64) func(*Run) float64 {
		return func(r *Run) float64 { return of(cpu(r, role)) / float64(r.Wins) }
	}
	whole := func(c bench.RoleCPU) float64 { return c.CrowdS + c.DrainS }
	c := Costs{
		Win:      per(allwin, perWin("api", whole)),
		Grab:     per(allwin, perWin("redis", func(c bench.RoleCPU) float64 { return c.BusiestS })),
		RedisAll: per(allwin, perWin("redis", whole)),
		Place:    per(allwin, perWin("worker", whole)),
		Write:    per(allwin, perWin("database", whole)),
		OrdersPerS: per(allwin, func(r *Run) float64 {
			return float64(r.Wins) / (r.Seconds + r.DrainS) / float64(max(cpu(r, "worker").Processes, 1))
		}),
		Setup: allwin[len(allwin)-1].Setup, Machine: allwin[len(allwin)-1].Machine,
	}
	c.Loss = per(flash, func(r *Run) float64 {
		return max(whole(cpu(r, "api"))-float64(r.Wins)*c.Win, 0) / float64(r.Requests-r.Wins)
	})
	for _, r := range flash {
		c.FlashRuns = append(c.FlashRuns, r.Scenario)
	}
	for _, r := range allwin {
		c.AllWinRuns = append(c.AllWinRuns, r.Scenario)
	}
	switch {
	case c.Win <= 0 || c.Loss <= 0:
		return Costs{}, fmt.Errorf("%w: the runs report no API CPU", ErrNoRun)
	case c.Grab <= 0 || c.Place <= 0:
		return Costs{}, fmt.Errorf("%w: the all-win runs report no Redis or worker CPU", ErrNoRun)
	}
	return c, nil
}

// median is the middle of xs (the mean of the two middle ones of an even count); it sorts xs.
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// measurable reports whether run r can give costs for the durability setting minReplicas.
func measurable(r *Run, minReplicas int) bool {
	s := r.Setup
	return r.OK && r.Fault == nil && r.Line == nil && r.Unanswered == 0 && r.Restocked == 0 && s != nil &&
		s.Redis != "" && !s.InProcess && s.MinReplicas == minReplicas &&
		slices.Contains(s.Roles, "api") && slices.Contains(s.Roles, "worker")
}

// cpu is the CPU of role in run r (zero when it reports none).
func cpu(r *Run, role string) bench.RoleCPU {
	for _, c := range r.CPU {
		if c.Role == role {
			return c
		}
	}
	return bench.RoleCPU{Role: role}
}
