package capacity

import (
	"errors"
	"fmt"
	"math"
	"time"

	"seckill/internal/sale"
)

// Sale is the sale to size.
type Sale struct {
	// Peak is the grab requests a second at the peak that reach the service: after any CDN or
	// WAF, before seckill's own rate limits (a refused request costs an API node an answer too).
	// Zero with a Ramp: the crowd's clicks spread evenly over it, Users × Clicks ÷ Ramp.
	Peak    float64       `json:"peak"`
	Ramp    time.Duration `json:"ramp"`
	Clicks  float64       `json:"clicks"` // clicks per user in a ramp (1: each clicks once)
	Users   int64         `json:"users"`
	Stock   int64         `json:"stock"`
	PerUser int64         `json:"per_user"`
	Kind    sale.Kind     `json:"kind"` // sale.KindItem or sale.KindRedPacket: only an item's stock shards
	// Drain is how long after the sale the workers may take to place its last order (the queue
	// holds the orders meanwhile): the slower the workers may be, the fewer they are.
	Drain time.Duration `json:"drain"`
	// Cores is a node's cores; Headroom the share of them to plan to use at the peak.
	Cores    int     `json:"cores"`
	Headroom float64 `json:"headroom"`
	// MinReplicas is SECKILL_REDIS_MIN_REPLICAS: replicas that must hold a grab before it is
	// acknowledged. The costs must have been measured with it.
	MinReplicas int `json:"min_replicas"`
	// Shards forces the hot item's stock shards; 0: the plan decides.
	Shards int64 `json:"shards"`
}

// Limits of a plan's input, so that a typo is refused rather than sized.
const (
	MaxPeak     = 1e9
	MaxUsers    = 1e10
	MaxCores    = 512
	MaxDrain    = 24 * time.Hour
	MaxReplicas = 2
)

// maxCost bounds a believable cost: a second of CPU for one request or order is a broken run.
const maxCost = 1.0

// ShortSale is how long the hot item may take to sell out on one master before the plan shards
// it: a crowd that waits less than this for one core is not worth a counter per master.
const ShortSale = time.Second

// Validate reports a sale that cannot be sized.
func (s Sale) Validate() error {
	switch {
	case s.Ramp < 0 || s.Ramp > MaxDrain:
		return fmt.Errorf("--arrival ramp:%s: want a ramp of up to %s", s.Ramp, MaxDrain)
	case s.Ramp > 0 && s.Peak != 0:
		return errors.New("--peak or --arrival ramp:DURATION, not both: a ramp's peak is its users' clicks over its length")
	case s.Ramp > 0 && !(s.Clicks >= 1 && s.Clicks <= 100):
		return fmt.Errorf("--clicks %g: want 1 to 100 clicks per user", s.Clicks)
	case s.Ramp > 0:
		return s.ramped().Validate()
	case !(s.Peak >= 1 && s.Peak <= MaxPeak):
		return fmt.Errorf("--peak %g: want 1 to %g grab requests a second (or --arrival ramp:DURATION)", s.Peak, MaxPeak)
	case s.Users < 1 || s.Users > MaxUsers:
		return fmt.Errorf("--users %d: want 1 to %g", s.Users, float64(MaxUsers))
	case s.Stock < 1 || s.Stock > sale.MaxStock:
		return fmt.Errorf("--stock %d: want 1 to %d", s.Stock, sale.MaxStock)
	case s.PerUser < 1:
		return fmt.Errorf("--per-user-limit %d: want at least 1", s.PerUser)
	case s.Kind != sale.KindItem && s.Kind != sale.KindRedPacket:
		return fmt.Errorf("--kind %q: want %s or %s", s.Kind, sale.KindItem, sale.KindRedPacket)
	case s.Drain < 0 || s.Drain > MaxDrain:
		return fmt.Errorf("--drain %s: want 0 to %s", s.Drain, MaxDrain)
	case s.Cores < 1 || s.Cores > MaxCores:
		return fmt.Errorf("--cores %d: want 1 to %d", s.Cores, MaxCores)
	case !(s.Headroom > 0 && s.Headroom <= 1):
		return fmt.Errorf("--headroom %g: want a share of a core in (0, 1]", s.Headroom)
	case s.MinReplicas < 0 || s.MinReplicas > MaxReplicas:
		return fmt.Errorf("--min-replicas %d: want 0 to %d", s.MinReplicas, MaxReplicas)
	case s.Shards < 0 || s.Shards > sale.MaxStockShards:
		return fmt.Errorf("--shards %d: want 0 (decide) to %d", s.Shards, sale.MaxStockShards)
	case s.Shards > 1 && s.Kind != sale.KindItem:
		return errors.New("--shards: only an item's stock shards; a red packet's shares are drawn on one master")
	}
	return nil
}

// ramped is the sale with its ramp turned into the peak it makes.
func (s Sale) ramped() Sale {
	if s.Ramp > 0 {
		s.Peak, s.Ramp = float64(s.Users)*s.Clicks/s.Ramp.Seconds(), 0
	}
	return s
}

// Plan is a sized deployment for a sale.
type Plan struct {
	Sale  Sale  `json:"sale"`
	Costs Costs `json:"costs"`

	Wins int64 `json:"wins"` // orders the sale makes
	// MasterRate is the winning grabs a second one Redis master takes at the headroom; the hot
	// item takes Shards of them. WinRate is the grabs a second that win while the stock lasts,
	// SellS how long it lasts.
	MasterRate float64 `json:"master_grabs_per_s"`
	Shards     int64   `json:"item_shards"`
	WinRate    float64 `json:"win_rate"`
	SellS      float64 `json:"sell_s"`
	// Masters are the Redis masters, each with Replicas replicas; RedisCores the CPU all
	// Redis processes use while the stock lasts.
	Masters    int     `json:"redis_masters"`
	Replicas   int     `json:"redis_replicas_per_master"`
	RedisCores float64 `json:"redis_cores"`
	// APINodes of Sale.Cores cores serve the peak, using APICores of CPU at it.
	APINodes int     `json:"api_nodes"`
	APICores float64 `json:"api_cores"`
	// WorkerNodes, WorkerRate orders a second each, place OrderRate orders a second, the
	// database's write rate after the funnel, and are done DrainS after the stock is gone; the
	// database spends DBCores on it.
	WorkerNodes int     `json:"worker_nodes"`
	WorkerRate  float64 `json:"worker_orders_per_s"`
	WorkerCores float64 `json:"worker_cores"`
	OrderRate   float64 `json:"order_rate"`
	DrainS      float64 `json:"drain_s"`
	DBCores     float64 `json:"db_cores"` // 0: the database's CPU was not measured
	// The rate limits to set (SECKILL_RATE_*), requests a second; 0: off.
	RateUser int `json:"rate_user"`
	RateNode int `json:"rate_node"`
	// Notes say why, where a choice is not plain from the figures.
	Notes []string `json:"notes"`
}

// Availability floors: a node of each kind can die mid-sale and the rest carry on (the
// deployment files' PodDisruptionBudget keeps two API pods); a Redis Cluster fails over with
// three masters at least.
const (
	minAPINodes     = 2
	minWorkerNodes  = 2
	minClusterNodes = 3
)

// DefaultRateUser is the node's own per-user limit (SECKILL_RATE_USER's default): a person
// clicking a few times a second, not a script.
const DefaultRateUser = 5

// Size sizes the deployment for s from the measured costs c.
func Size(s Sale, c Costs) (Plan, error) {
	if err := s.Validate(); err != nil {
		return Plan{}, err
	}
	asked := s
	s = s.ramped()
	for _, x := range []float64{c.Win, c.Loss, c.Grab, c.Place, c.RedisAll, c.Write} {
		if !(x >= 0 && x <= maxCost) {
			return Plan{}, fmt.Errorf("%w: a cost of %g CPU seconds per unit of work is not a measurement", ErrNoRun, x)
		}
	}
	if c.Win == 0 || c.Loss == 0 || c.Grab == 0 || c.Place == 0 {
		return Plan{}, fmt.Errorf("%w: the costs %+v are not all measured", ErrNoRun, c)
	}
	p := Plan{Sale: asked, Costs: c, Wins: min(s.Stock, s.Users*s.PerUser), RateUser: DefaultRateUser}
	p.MasterRate = s.Headroom / c.Grab
	note := func(format string, args ...any) { p.Notes = append(p.Notes, fmt.Sprintf(format, args...)) }

	// The hot item: every request before the stock is gone is a grab on its master(s).
	p.Shards = max(s.Shards, 1)
	oneMaster := float64(p.Wins) / min(s.Peak, p.MasterRate)
	switch {
	case s.Shards > 0:
	case s.Peak <= p.MasterRate:
		note("one master takes the peak's grabs at %.0f %% of a core: no shards", 100*s.Headroom)
	case oneMaster <= ShortSale.Seconds():
		note("one master sells the %s units in %.2f s, under %s: no shards", group(float64(p.Wins)), oneMaster, ShortSale)
	case s.Kind != sale.KindItem:
		note("a red packet's shares are drawn on one master: %.2f s to hand them all out; to go faster, split the rain into several packets", oneMaster)
	default:
		p.Shards = min(int64(math.Ceil(s.Peak/p.MasterRate)), sale.MaxStockShards, p.Wins)
		note("one master would take %.1f s to sell the %s units: the stock is split into %d shards on as many masters", oneMaster, group(float64(p.Wins)), p.Shards)
	}
	p.WinRate = min(s.Peak, float64(p.Shards)*p.MasterRate)
	p.SellS = float64(p.Wins) / p.WinRate

	p.Replicas = s.MinReplicas + 1 // a replica to fail over to, and N to acknowledge each grab after it
	p.Masters = int(p.Shards)
	if p.Shards > 1 || p.Replicas > 1 {
		p.Masters = max(p.Masters, minClusterNodes)
	}
	p.RedisCores = p.WinRate * c.RedisAll
	if p.Masters == 1 {
		note("one master with %d replica(s) under Sentinel (or a Redis Cluster of %d masters, the item's slot on one)", p.Replicas, minClusterNodes)
	}

	// API nodes: while the stock lasts, WinRate requests win and the rest of the peak is
	// answered without a unit (a rate limit, the sold-out flag, or the gate's own sold out).
	p.APICores = p.WinRate*c.Win + (s.Peak-p.WinRate)*c.Loss
	p.APINodes = max(int(math.Ceil(p.APICores/(float64(s.Cores)*s.Headroom))), minAPINodes)

	// Workers: the queue holds the orders, so they need place them only as fast as the drain
	// allows, and never faster than they arrive. A worker is one loop (read a batch, place it in
	// one transaction, acknowledge it): its own CPU and the database's time per order, one after
	// the other, bound it, whatever its machine's cores.
	need := p.WinRate
	if s.Drain > 0 {
		need = min(p.WinRate, float64(p.Wins)/(p.SellS+s.Drain.Seconds()))
	}
	p.WorkerRate = s.Headroom / (c.Place + c.Write)
	p.WorkerNodes = max(int(math.Ceil(need/p.WorkerRate)), minWorkerNodes)
	p.OrderRate = min(p.WinRate, float64(p.WorkerNodes)*p.WorkerRate)
	p.WorkerCores = p.OrderRate * c.Place
	p.DrainS = max(float64(p.Wins)/p.OrderRate-p.SellS, 0)
	p.DBCores = p.OrderRate * c.Write / s.Headroom
	if c.Write == 0 {
		note("the database's CPU was not measured (the bench run's database was not one bench started): the workers' rate counts their own CPU only")
	}
	if each := p.OrderRate / float64(p.WorkerNodes); each > c.OrdersPerS {
		note("a worker placing %s orders/s goes beyond the %s/s one was measured at (the run's wins came no faster), and %s/s into one database beyond anything measured: both extrapolated from CPU; a longer --drain asks for fewer workers and a lower write rate",
			group(each), group(c.OrdersPerS), group(p.OrderRate))
	}

	// Beyond what the item's masters take, grabs would queue on Redis (each costs a script call
	// for its user's bucket, and one for the gate) until the stock is gone and the sold-out flag
	// answers the rest. The node's limit refuses them in memory instead: the nodes' limits
	// together admit what the masters take.
	if s.Peak > p.WinRate {
		p.RateNode = max(int(p.WinRate)/p.APINodes, 1)
		note("SECKILL_RATE_NODE=%d on each of the %d API nodes admits the %s grabs/s the item's masters take and refuses the other %s at once, in memory; without it they would queue on Redis for up to %.1f s past the sell-out. With an autoscaler, size it for the most nodes it may start, or use SECKILL_RATE_GLOBAL (one bucket for the whole cluster, at the price of a script call on one master per request)",
			p.RateNode, p.APINodes, group(p.WinRate), group(s.Peak-p.WinRate), (s.Peak/p.WinRate-1)*p.SellS)
	}
	return p, nil
}
