package bench

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// A nemesis (issue 39) strikes a spawned deployment again and again while a crowd runs: a fault
// drawn from those the deployment has, healed after a drawn hold, then the next. Schedule draws
// the whole schedule from a seed before the run, so that a seed replays it.

// Topology is what a nemesis run's deployment has to strike: the nodes bench started (API nodes
// and worker nodes), its Redis (--redis: "" for the embedded gate, spawn, spawn:cluster or
// spawn:sentinel) and its database (--db: sqlite, spawn:mariadb or spawn:postgres), and whether
// netfault proxies stand between the nodes and every Redis server (and sentinel) bench started.
type Topology struct {
	APINodes, Workers int
	Redis, DB         string
	Netem             bool
}

// The kinds of strike.
const (
	KillAPI          = "kill-api"          // SIGKILL an API node, restarted at the heal
	StopAPI          = "stop-api"          // SIGSTOP an API node, SIGCONT at the heal
	KillWorker       = "kill-worker"       // SIGKILL a worker node, restarted at the heal
	StopWorker       = "stop-worker"       // SIGSTOP a worker node
	KillRedis        = "kill-redis"        // SIGKILL the redis-server, restarted on its AOF at the heal
	ClusterFailover  = "cluster-failover"  // SIGKILL the activity's master; its replica takes over
	KillReplica      = "kill-replica"      // SIGKILL a replica (of the activity's master), restarted at the heal
	SentinelFailover = "sentinel-failover" // SIGKILL the master; the sentinels name another
	Reshard          = "reshard"           // move the activity's slot to another master
	DBOutage         = "db-outage"         // stop the database until the heal
	NetLatency       = "net-latency"       // 200 ms each way between the nodes and every Redis server
	NetReset         = "net-reset"         // every connection of the nodes to Redis reset
	NetPartition     = "net-partition"     // nothing between the nodes and Redis answers, nothing closes
	SkewAPI          = "skew-api"          // an API node's clock off by Strike.Skew, back at the heal
	SkewWorker       = "skew-worker"       // a worker node's clock off by Strike.Skew
)

// MaxClockSkew is how far off the true time the deployment promises to bear a node's clock (docs/
// operating.md, "Clocks"): the nemesis's skews are drawn within it, either way.
const MaxClockSkew = time.Second

// minClockSkew is the least skew drawn: below it a node's clock is as NTP keeps it anyway.
const minClockSkew = 50 * time.Millisecond

// Kinds are the strikes t has, in a fixed order.
func (t Topology) Kinds() []string {
	var kinds []string
	if t.APINodes > 1 { // one stays up
		kinds = append(kinds, KillAPI, StopAPI, SkewAPI)
	}
	if t.Workers > 0 {
		kinds = append(kinds, KillWorker, StopWorker, SkewWorker)
	}
	switch t.Redis {
	case "spawn":
		kinds = append(kinds, KillRedis)
	case "spawn:cluster":
		kinds = append(kinds, ClusterFailover, Reshard, KillReplica)
	case "spawn:sentinel":
		kinds = append(kinds, SentinelFailover, KillReplica)
	}
	if t.DB == "spawn:mariadb" || t.DB == "spawn:postgres" {
		kinds = append(kinds, DBOutage)
	}
	if t.Netem && t.Redis != "" {
		kinds = append(kinds, NetLatency, NetReset, NetPartition)
	}
	return kinds
}

// Strike is one fault of a schedule: Kind on its Target (the index of the node among the API
// nodes or the workers; 0 for the others), from At after the crowd began, healed Hold later.
// Skew is a clock skew's offset (ahead when positive).
type Strike struct {
	At     time.Duration `json:"at"`
	Hold   time.Duration `json:"hold"`
	Kind   string        `json:"kind"`
	Target int           `json:"target"`
	Skew   time.Duration `json:"skew,omitempty"`
}

// The schedule's draws: the time from one strike to the next, and a strike's hold.
const (
	minGap, maxGap   = 2 * time.Second, 6 * time.Second
	minHold, maxHold = time.Second, 5 * time.Second
	// MaxAtOnce bounds the strikes in force together.
	MaxAtOnce = 2
)

// group is what a strike takes away, for the bounds of the promise: at most one strike on Redis
// (a master and its replicas, or a failover during a bad network, are beyond what the
// deployment promises), one on the database, one per node, and never every API node.
func group(kind string) string {
	switch kind {
	case KillAPI, StopAPI, SkewAPI:
		return "api"
	case KillWorker, StopWorker, SkewWorker:
		return "worker"
	case DBOutage:
		return "db"
	}
	return "redis"
}

// Schedule draws the strikes of a run of d from seed on t: the first after one gap, each next a
// gap after the one before, while the run lasts, each healed before the run ends. A strike that
// would break the bounds (see group; MaxAtOnce) is drawn again as another, or left out when none
// fits. The same seed and topology give the same schedule.
func Schedule(seed uint64, d time.Duration, t Topology) ([]Strike, error) {
	kinds := t.Kinds()
	switch {
	case len(kinds) == 0:
		return nil, fmt.Errorf("the nemesis needs a deployment bench started (--spawn, --workers, --redis spawn..., --db spawn:...): %+v has nothing to strike", t)
	case d < minGap+minHold:
		return nil, fmt.Errorf("--duration %s: the nemesis needs at least %s", d, minGap+minHold)
	}
	r := rand.New(rand.NewPCG(seed, 0x6e656d65736973))
	draw := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(r.Int64N(int64(hi-lo)+1)).Truncate(time.Millisecond)
	}
	var out []Strike
	for at := draw(minGap, maxGap); at+minHold <= d; at += draw(minGap, maxGap) {
		var live []Strike // the strikes still in force at at
		for _, s := range out {
			if s.At+s.Hold > at {
				live = append(live, s)
			}
		}
		if len(live) >= MaxAtOnce {
			continue
		}
		hold := min(draw(minHold, maxHold), d-at)
		for _, k := range r.Perm(len(kinds)) {
			s := Strike{At: at, Hold: hold, Kind: kinds[k]}
			if s.Target = fits(s, live, t, r); s.Target >= 0 {
				if s.Kind == SkewAPI || s.Kind == SkewWorker {
					s.Skew = draw(minClockSkew, MaxClockSkew)
					if r.IntN(2) == 0 {
						s.Skew = -s.Skew // behind
					}
				}
				out = append(out, s)
				break
			}
		}
	}
	return out, nil
}

// partOf names the part of the deployment s strikes: a node of its group, or the group itself
// (Redis, the database) where one strike at a time is the bound.
func partOf(s Strike) string {
	g := group(s.Kind)
	if g == "api" || g == "worker" {
		return fmt.Sprintf("%s %d", g, s.Target)
	}
	return g
}

// fits returns the target s may strike beside the strikes live, drawn from r, or -1 when none
// may: one strike on Redis and one on the database at a time, a node struck once at a time, and
// at least one API node up (the workers may all be down at once: the queue keeps the grabs).
func fits(s Strike, live []Strike, t Topology, r *rand.Rand) int {
	g := group(s.Kind)
	nodes := map[string]int{"api": t.APINodes, "worker": t.Workers}[g]
	var struck []int
	for _, l := range live {
		if group(l.Kind) != g {
			continue
		}
		if nodes == 0 { // Redis, the database: one at a time
			return -1
		}
		struck = append(struck, l.Target)
	}
	if nodes == 0 {
		return 0
	}
	if len(struck)+1 >= nodes && g == "api" || len(struck) >= nodes { // one API node stays up
		return -1
	}
	var free []int
	for i := range nodes {
		if !slices.Contains(struck, i) {
			free = append(free, i)
		}
	}
	return free[r.IntN(len(free))]
}
