// Package capacity sizes a deployment for a sale from what seckill bench measured (Costs): the
// CPU time an API node spends on a losing and on a winning grab, the busiest Redis master on a
// grab, a worker and the database on an order. It says how many nodes of each kind, how many
// Redis masters, whether to shard the hot item, what write rate reaches the database and which
// rate limits to set (seckill plan, a reservation sale's forecast, and docs/CAPACITY.md, which
// explains the model). The costs come from the bench's result lines (bench.CostsOf); Measured
// are those of the project's own runs.
package capacity

import "errors"

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
	FlashRuns  []string `json:"flash_runs"`
	AllWinRuns []string `json:"allwin_runs"`
	Setup      string   `json:"setup"`
	Machine    string   `json:"machine"`
}

// ErrNoRun is returned by CostsOf when the results hold no run it can measure a cost from.
var ErrNoRun = errors.New("no usable bench run")
