package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"seckill/internal/capacity"
)

// ResultLine is a result line as scripts/bench/run.sh writes it: bench's result with the scenario's
// name and the machine's cores.
type ResultLine struct {
	Result
	Scenario string `json:"scenario"`
	Machine  string `json:"machine"`
}

// ReadResults reads result lines, one JSON object each; blank lines are skipped.
func ReadResults(r io.Reader) ([]ResultLine, error) {
	var runs []ResultLine
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var run ResultLine
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

// CostsOf takes the costs from the clean runs of the results measured with minReplicas
// replicas acknowledging each grab: all-win runs (every request a win) for the cost of a win,
// a grab and an order, flash runs (the stock at most a quarter of the requests) for the cost of
// a loss. Each cost is the median of the runs' (figures on shared cores move by a fifth from
// run to run). A run is clean when the checker passed, nothing was struck, every request was
// answered and bench ran the API and the worker as processes of their own
// (--spawn N --workers M) on Redis: only then are their CPU times apart.
func CostsOf(runs []ResultLine, minReplicas int) (capacity.Costs, error) {
	var flash, allwin []*ResultLine
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
		return capacity.Costs{}, fmt.Errorf("%w with --min-replicas %d: want a clean all-win run and a clean flash run of seckill bench --redis ... --spawn N --workers M --json (scripts/bench/run.sh capacity-); found %d all-win, %d flash",
			capacity.ErrNoRun, minReplicas, len(allwin), len(flash))
	}
	per := func(runs []*ResultLine, f func(*ResultLine) float64) float64 {
		xs := make([]float64, len(runs))
		for i, r := range runs {
			xs[i] = f(r)
		}
		return median(xs)
	}
	perWin := func(role string, of func(RoleCPU) float64) func(*ResultLine) float64 {
		return func(r *ResultLine) float64 { return of(cpu(r, role)) / float64(r.Wins) }
	}
	whole := func(c RoleCPU) float64 { return c.CrowdS + c.DrainS }
	c := capacity.Costs{
		Win:      per(allwin, perWin("api", whole)),
		Grab:     per(allwin, perWin("redis", func(c RoleCPU) float64 { return c.BusiestS })),
		RedisAll: per(allwin, perWin("redis", whole)),
		Place:    per(allwin, perWin("worker", whole)),
		Write:    per(allwin, perWin("database", whole)),
		OrdersPerS: per(allwin, func(r *ResultLine) float64 {
			return float64(r.Wins) / (r.Seconds + r.DrainS) / float64(max(cpu(r, "worker").Processes, 1))
		}),
		Setup: allwin[len(allwin)-1].Setup.String(), Machine: allwin[len(allwin)-1].Machine,
	}
	c.Loss = per(flash, func(r *ResultLine) float64 {
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
		return capacity.Costs{}, fmt.Errorf("%w: the runs report no API CPU", capacity.ErrNoRun)
	case c.Grab <= 0 || c.Place <= 0:
		return capacity.Costs{}, fmt.Errorf("%w: the all-win runs report no Redis or worker CPU", capacity.ErrNoRun)
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
func measurable(r *ResultLine, minReplicas int) bool {
	s := r.Setup
	return r.OK && r.Fault == nil && r.Line == nil && r.Unanswered == 0 && r.Restocked == 0 && s != nil &&
		s.Redis != "" && !s.InProcess && s.MinReplicas == minReplicas &&
		slices.Contains(s.Roles, "api") && slices.Contains(s.Roles, "worker")
}

// cpu is the CPU of role in run r (zero when it reports none).
func cpu(r *ResultLine, role string) RoleCPU {
	for _, c := range r.CPU {
		if c.Role == role {
			return c
		}
	}
	return RoleCPU{Role: role}
}

// String says how s set the servers up, as a plan reports the costs' runs.
func (s *Setup) String() string {
	if s == nil {
		return ""
	}
	fsync := s.Fsync
	if fsync == "" {
		fsync = "(none)"
	}
	return fmt.Sprintf("Redis %s, appendfsync %s, min-replicas %d, database %s", s.Redis, fsync, s.MinReplicas, s.DB)
}
