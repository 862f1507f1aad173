// Package node builds a seckill node, in one place, from one Config: the database and its guard,
// the stock gate's backend (embedded, or Redis) and its guard, the sale service and its features
// on them, the metrics, the HTTP API and pages with their tokens, limits and risk rules, and the
// background loops. cmd/seckill reads its settings into a Config and serves the node's Handler
// on its listeners; the suites (internal/node/nodetest) and the bench build the node the
// same way, with the same guards, so that what they test is what the binary runs.
package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"seckill/internal/breaker"
	"seckill/internal/httpapi"
	"seckill/internal/metrics"
	"seckill/internal/ratelimit"
	"seckill/internal/redisstore"
	"seckill/internal/relay"
	"seckill/internal/risk"
	"seckill/internal/sale"
	"seckill/internal/sqlstore"
)

// The roles of a node. A distributed deployment may run API nodes and worker nodes apart, so that
// draining the queue never takes CPU from the crowd, and each kind scales (and fails) on its own.
const (
	RoleAll    = "all"    // the HTTP API, the queue's worker and the payment-window sweeper
	RoleAPI    = "api"    // the HTTP API only
	RoleWorker = "worker" // the worker and the sweeper; on the API's port only /healthz and /readyz
)

// Config is what a node is built from. The zero value of a tuning field takes the binary's
// default (Defaults); cmd/seckill fills the rest from its settings.
type Config struct {
	DB string // sqlite:PATH, mysql://... or postgres://...
	// DBConns is how many connections the node keeps to a MariaDB/MySQL or PostgreSQL DB at
	// most; 0: sqlstore.DefaultConns.
	DBConns int
	Redis   string // empty: the embedded gate
	// RedisVia is a lab's (a development build's SECKILL_LAB_REDIS_VIA): the address dialled
	// instead of each Redis server's, a bad network the nemesis strikes (redisstore.Via); nil:
	// each server's own.
	RedisVia map[string]string
	Role     string // RoleAll, RoleAPI or RoleWorker; empty: RoleAll

	// Replication is how many Redis replicas must have a write before it is acknowledged.
	Replication redisstore.Replication
	// GateLimits and DBLimits are the guards' thresholds of the gate's backend and of the
	// database.
	GateLimits, DBLimits breaker.Thresholds
	// ClaimIdle is how long a stream entry stays with a silent worker before another takes it.
	ClaimIdle time.Duration
	// RankExactMax is the most shares a red packet's leaderboard keeps exactly.
	RankExactMax int64

	// The background jobs (Start): the payment-window sweeper's period, the scheduled reconcile
	// (0: off) and whether it repairs, how long a finished activity's hot state and a delivered
	// event are kept (0: for ever).
	SweepEvery      time.Duration
	ReconcileEvery  time.Duration
	ReconcileRepair bool
	ArchiveAfter    time.Duration
	EventsKeep      time.Duration
	// RemindBefore is how long before a reservation sale's wave opens its reminder is written
	// to the outbox (0: none).
	RemindBefore time.Duration

	// The receivers of the order events: webhooks (each signed with WebhookSecret) and a Kafka
	// topic.
	Webhooks      []string
	WebhookSecret string
	KafkaBrokers  []string
	KafkaTopic    string

	// Log is the node's log (nil: nowhere); Now its clock (nil: time.Now).
	Log *slog.Logger
	Now func() time.Time

	// API is the HTTP layer's: tokens, admins, limits, risk rules.
	API API

	// Payments are the payment providers the buyers pay at (none: the pay call pays).
	Payments Payments

	// Tuning: what a test sets apart from the binary's defaults, for speed, never for
	// behaviour.
	Tuning Tuning

	// Wrap, when set, wraps the adapters below their guards: the faults a suite makes, as a
	// dependency that fails would, and what it watches.
	Wrap Wrap
}

// Tuning are the node's knobs that only change how soon things happen.
type Tuning struct {
	// SoldOutTTL is how long the node trusts a sold-out answer (see sale.Deps).
	SoldOutTTL time.Duration
	// ReconcilePause is a reconcile's wait between its two readings (see sale.Deps).
	ReconcilePause time.Duration
	// QueuePoll is how often the embedded queue looks for grabs without being woken, and
	// QueueList how often the Redis queue lists the activities whose streams it reads.
	QueuePoll, QueueList time.Duration
	// GateBatch is the embedded gate's group commit size.
	GateBatch int
}

// Wrap wraps the adapters of a node below their guards (nil: as they are).
type Wrap struct {
	Gate       func(sale.Gate) sale.Gate
	Store      func(sale.Store) sale.Store
	Challenges func(sale.ChallengeStore) sale.ChallengeStore
	Ranking    func(sale.Ranking) sale.Ranking // the red packets' leaderboards
	Line       func(sale.Line) sale.Line       // the waiting lines
	// Buckets are the HTTP layer's token buckets (the grab's rate limits per user, activity and
	// node).
	Buckets func(ratelimit.Limiter) ratelimit.Limiter
}

// The binary's defaults of the tuning knobs.
const (
	defaultQueuePoll = time.Second
	defaultGateBatch = 512
)

// Node is a node built from its Config. Its loops run once Start is called; Close stops them
// and closes what it opened.
type Node struct {
	Config  Config
	Service *sale.Service
	// Features are the services beside the core one (see internal/sale): Outbox is nil on a
	// node with no receiver of the order events, Lines on one without a line.
	sale.Features
	// Store is the database as it opened (for its own methods); DB the same behind its guard,
	// as the service sees it.
	Store *sqlstore.Store
	DB    sale.Store
	// Queue is the gate's queue of grabs on their way to orders; Gate the gate, Line the waiting
	// lines and Ranking the red packets' leaderboards, behind their guard.
	Queue   sale.Queue
	Gate    sale.Gate
	Line    sale.Line
	Ranking sale.Ranking
	// Monitor reads the guards' health; Metrics are the node's Prometheus metrics.
	Monitor *breaker.Monitor
	Metrics *metrics.Metrics
	// Windows and Buckets keep the HTTP layer's rate limits (in the process, or on Redis);
	// UserAtGate says the gate checks a grab's per-user rate in its own call.
	Windows, Buckets ratelimit.Limiter
	UserAtGate       bool
	// RiskWindows keeps the risk engine's windows for every node (distributed mode: on Redis,
	// behind its guard); nil: each node's own memory, right for the one embedded node.
	RiskWindows risk.Windows
	// Sinks are the receivers of the order events the configuration names.
	Sinks []relay.Sink
	// API is the node's HTTP API and pages (Handler serves them as its role asks), and Risk the
	// risk engine that vets its grabs.
	API  *httpapi.Server
	Risk *risk.Engine

	b    backend
	pay  payments // the payment providers, built
	name string   // this node's name among the consumers and lease holders
	// loops is the context of the node's background loops, which Close cancels, then waits for
	// them in wg.
	loops  context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup
	closed sync.Once
	// onPlaced registers, once, what the orders the gate's commits place are told to.
	onPlaced sync.Once
}

// Open builds the node of c: it opens the database and the gate's backend, builds the service
// on them behind their guards, loads the activities into the gate, reads the blacklist and
// builds the HTTP API. It runs no loop yet (Start).
func Open(ctx context.Context, c Config) (_ *Node, err error) {
	if c.Role == "" {
		c.Role = RoleAll
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	n := &Node{Config: c, name: consumerName()}
	n.loops, n.stop = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	conns := c.DBConns
	if conns == 0 {
		conns = sqlstore.DefaultConns
	}
	if n.Store, err = sqlstore.OpenPool(ctx, c.DB, conns); err != nil {
		return nil, err
	}
	if n.Sinks, err = c.sinks(); err != nil {
		return nil, err
	}
	if n.pay, err = c.Payments.open(); err != nil {
		return nil, err
	}
	var names []string
	for _, s := range n.Sinks {
		names = append(names, s.Name())
	}
	// Every node writes the events: the API's pays and cancels as the worker's orders.
	n.Store.EmitTo(names...)
	if n.pay.refunds {
		n.Store.EmitOnly(refundSinkName, sale.EventRefundRequested)
	}
	dbGuard := breaker.NewGuard(breaker.Database, c.DBLimits, time.Now).LogTo(c.Log)
	var store sale.Store = n.Store
	if c.Wrap.Store != nil {
		store = c.Wrap.Store(store)
	}
	n.DB = breaker.GuardStore(store, dbGuard)
	if n.b, err = openBackend(ctx, c, n.DB, n.name); err != nil {
		return nil, err
	}
	n.Gate, n.Queue, n.Line, n.Ranking = n.b.gate, n.b.queue, n.b.line, n.b.ranking
	n.Windows, n.Buckets, n.UserAtGate, n.RiskWindows = n.b.windows, n.b.buckets, n.b.userAtGate, n.b.riskWindows
	n.Monitor = breaker.NewMonitor(n.b.guard, dbGuard)
	n.Metrics = metrics.New().Watch(n.Monitor)
	deps := sale.DepsOf(n.b.gate, n.b.queue, n.DB)
	deps.Line, deps.Ranking, deps.Events = n.b.line, n.b.ranking, n.Metrics.Order
	deps.Now, deps.ReconcilePause = c.Now, c.Tuning.ReconcilePause
	deps.SoldOutTTL = c.Tuning.SoldOutTTL
	if n.b.restocks != nil {
		deps.Restocks = n.b.restocks
		if deps.SoldOutTTL == 0 {
			deps.SoldOutTTL = restockFlagTTL
		}
	}
	n.Service = sale.NewService(deps)
	// The features beside the core, each on its own ports. The outbox's is its operators'
	// view, of a node that has receivers to send to.
	n.Operator = sale.NewOperator(n.Service)
	if len(n.pay.providers) > 0 {
		n.Payments = sale.NewPayments(n.Service, n.DB, c.Payments.returnTo, n.pay.providers...)
		if n.pay.refunds {
			n.Sinks = append(n.Sinks, refundSink{n.Payments})
		}
	}
	n.Lines = sale.NewLines(n.Service)
	n.Reservations = sale.NewReservations(n.Service, n.DB, n.Gate)
	n.Forecasts = sale.NewForecasts(n.Service, n.DB, n.DB)
	n.Boards = sale.NewBoards(n.Service, breaker.GuardLeaders(n.Store, dbGuard))
	n.Challenges = sale.NewChallenges(n.Service, n.b.challenges)
	n.Blocks = sale.NewBlocks(n.DB, c.Now)
	n.Audit = sale.NewAudit(n.DB, c.Now)
	if len(n.Sinks) > 0 {
		n.Outbox = sale.NewOutbox(n.DB, c.Now)
	}
	n.Metrics.WatchLeaderboards(n.Boards.Usages).WatchActivities(n.Service.Gauges)
	if err := n.Service.Warm(ctx, c.Now().Add(-sale.MaxPayWindow)); err != nil {
		return nil, err
	}
	if err := n.Blocks.Reload(ctx); err != nil {
		return nil, err
	}
	if err := n.openAPI(); err != nil {
		return nil, err
	}
	return n, nil
}

// Ping reports whether the database and the gate's backend answer.
func (n *Node) Ping(ctx context.Context) error {
	return errors.Join(n.Store.Ping(ctx), n.b.ping(ctx))
}

// Start runs the node's background loops, as its role asks (see startLoops), until Close.
func (n *Node) Start() { n.startLoops() }

// Go runs fn in the node's background, with the context Close cancels: a loop of the caller's
// (the risk files' watcher, a suite's worker) that must stop before the node closes.
func (n *Node) Go(fn func(ctx context.Context)) { n.wg.Go(func() { fn(n.loops) }) }

// Close stops the loops (the worker finishes its batch, the sweeper its round), then closes the
// gate's backend and the database, in that order. Closing twice is harmless.
func (n *Node) Close() {
	n.closed.Do(func() {
		n.stop()
		n.wg.Wait()
		if n.Risk != nil {
			n.Risk.Close() // the recording's last lines, once no grab is vetted
		}
		if n.b.close != nil {
			n.b.close()
		}
		if n.Store != nil {
			n.Store.Close()
		}
		for _, s := range n.Sinks {
			if c, ok := s.(interface{ Close() }); ok {
				c.Close() // a Kafka producer flushes
			}
		}
	})
}

// Name is the node's name among the consumers of the queue and the holders of leases.
func (n *Node) Name() string { return n.name }

// consumerName names a node in the stream's consumer group and among lease holders: unique per
// process and node.
func consumerName() string {
	host, _ := os.Hostname()
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
