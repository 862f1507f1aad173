package capacity

import (
	_ "embed"
	"encoding/json"
	"fmt"

	"seckill/internal/sale"
)

// measured are the costs of the project's own bench runs (docs/bench/results.jsonl), by
// SECKILL_REDIS_MIN_REPLICAS, as CostsOf takes them: what a node sizes a forecast's plan with
// (GET /api/admin/activities/{id}/forecast), having no results file of its own.
// TestMeasuredAreTheProjectsResults holds them to the file; go test ./internal/capacity -run
// TestMeasured -update writes them again after new runs.
//
//go:embed measured.json
var measured []byte

// Measured returns the costs of the project's bench runs measured with minReplicas replicas
// acknowledging each grab.
func Measured(minReplicas int) (Costs, error) {
	var byReplicas map[int]Costs
	if err := json.Unmarshal(measured, &byReplicas); err != nil {
		return Costs{}, fmt.Errorf("the measured costs: %w", err)
	}
	c, ok := byReplicas[minReplicas]
	if !ok {
		return Costs{}, fmt.Errorf("%w with --min-replicas %d among the project's measured costs", ErrNoRun, minReplicas)
	}
	return c, nil
}

// ForForecast sizes the deployment for a reservation sale's forecast peak (sale.Forecast), on
// the project's measured costs: the expected peak's requests a second from the expected
// buyers, for the sale's stock and per-user limit; terms gives the nodes' cores, the headroom,
// the drain and the replicas acknowledging each grab. Errors: sale.ErrInvalid for terms it
// refuses; ErrNoRun without costs measured with those replicas.
func ForForecast(f sale.Forecast, terms Sale) (Plan, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{sale.ErrInvalid}, args...)...)
	}
	switch t := terms; {
	case t.Cores < 1 || t.Cores > MaxCores:
		return Plan{}, bad("cores %d: want 1 to %d", t.Cores, MaxCores)
	case !(t.Headroom > 0 && t.Headroom <= 1):
		return Plan{}, bad("headroom %g: want a share of a core in (0, 1]", t.Headroom)
	case t.Drain < 0 || t.Drain > MaxDrain:
		return Plan{}, bad("drain %s: want 0 to %s", t.Drain, MaxDrain)
	case t.MinReplicas < 0 || t.MinReplicas > MaxReplicas:
		return Plan{}, bad("min_replicas %d: want 0 to %d", t.MinReplicas, MaxReplicas)
	}
	a := f.Activity
	s := terms
	s.Peak, s.Ramp, s.Clicks = max(f.ExpectedPeakRPS, 1), 0, 1
	s.Users, s.Stock, s.PerUser, s.Kind, s.Shards = max(f.ExpectedBuyers, 1), a.Stock, max(a.PerUserLimit, 1), a.Kind, 0
	if err := s.Validate(); err != nil {
		return Plan{}, fmt.Errorf("%w: %v", sale.ErrInvalid, err)
	}
	c, err := Measured(s.MinReplicas)
	if err != nil {
		return Plan{}, err
	}
	return Size(s, c)
}
