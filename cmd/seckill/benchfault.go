//go:build !release

// The servers bench starts for a run (spawn:...) and the faults it strikes them with. A release
// build (go build -tags release) leaves them out, and with them the code that starts Redis,
// MariaDB and PostgreSQL processes and bad networks: see bench_release.go.

package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"seckill/internal/netfault"
	"seckill/internal/servers"
)

// restartable is a server bench started and may kill.
type restartable interface {
	Kill()
	Restart() error
}

// owned are the servers bench started for the run (--redis spawn..., --db spawn:...) and the
// bad network it put before one of them.
type owned struct {
	redis, db restartable
	cluster   *servers.RedisCluster // --redis spawn:cluster
	sentinels *servers.Sentinels    // --redis spawn:sentinel, watching master
	master    *servers.Redis
	// sentinelGroup are the master and replicas the sentinels watch, master first.
	sentinelGroup []*servers.Redis
	// proxies are the bad networks: --fault netem's one, or the nemesis's before every Redis
	// server and sentinel (routeRedis).
	proxies []*netfault.Proxy
	// minReplicas is the replicas every write waits for (--min-replicas): a failover is over
	// only once the new master has them in sync.
	minReplicas int
	close       []func()
}

func (o *owned) stop() {
	for i := len(o.close) - 1; i >= 0; i-- {
		o.close[i]()
	}
}

// database is a database server bench started.
type database interface {
	restartable
	CreateDatabase(name string) (dsn string, err error)
	Close()
}

// spawnFsync is the appendfsync of the Redis servers bench starts: every acknowledged grab on
// disk, the setting seckill is measured with.
const spawnFsync = "always"

// failoverTimeout bounds how long a failover bench caused may take to name a new master.
const failoverTimeout = time.Minute

// startServers starts the servers c asks bench to run, and points c.redis and c.db at them (or,
// for --fault netem, at the bad network before them); a nemesis's nodes are routed through a
// bad network before every Redis server and sentinel instead (routeRedis).
func startServers(c *benchConfig) (*owned, error) {
	o := &owned{minReplicas: c.minReplicas}
	tempDir := func() (string, error) {
		dir, err := os.MkdirTemp("", "seckill-bench-redis-")
		if err == nil {
			o.close = append(o.close, func() { os.RemoveAll(dir) })
		}
		return dir, err
	}
	aof := servers.RedisOptions{AOF: true, Fsync: spawnFsync}
	switch c.redis {
	case redisSpawn:
		dir, err := tempDir()
		if err != nil {
			return o, err
		}
		srv, err := servers.StartRedis(dir, aof)
		if err != nil {
			return o, err
		}
		o.close = append(o.close, srv.Stop)
		o.redis, c.redis = srv, srv.URL()
	case redisSpawnCluster:
		dir, err := tempDir()
		if err != nil {
			return o, err
		}
		// A master's death costs it a replica: with --min-replicas N, N+1 a master keep the
		// setting satisfiable after the failover (with N, every grab would be BUSY until the
		// killed node rejoined as the new master's replica).
		cl, err := servers.StartRedisCluster(dir, servers.ClusterOptions{Replicas: c.minReplicas + 1,
			NodeTimeout: 1500 * time.Millisecond, Persistence: aof}, nil)
		if err != nil {
			return o, err
		}
		o.close = append(o.close, cl.Stop)
		o.cluster, c.redis = cl, cl.Seeds()
	case redisSpawnSentinel:
		dir, err := tempDir()
		if err != nil {
			return o, err
		}
		persistence, _ := aof.Args()
		if err := os.MkdirAll(filepath.Join(dir, "master"), 0o755); err != nil {
			return o, err
		}
		master, err := servers.StartRedisArgs(filepath.Join(dir, "master"), persistence, servers.FreePort, nil)
		if err != nil {
			return o, err
		}
		o.close = append(o.close, master.Stop)
		for i := range 2 {
			d := filepath.Join(dir, fmt.Sprint("replica", i))
			if err := os.MkdirAll(d, 0o755); err != nil {
				return o, err
			}
			r, err := servers.StartRedisReplica(d, master.Addr(), persistence, nil)
			if err != nil {
				return o, err
			}
			o.close = append(o.close, r.Stop)
			o.sentinelGroup = append(o.sentinelGroup, r)
		}
		s, err := servers.StartSentinels(dir, master.Addr(), servers.SentinelOptions{}, nil)
		if err != nil {
			return o, err
		}
		o.close = append(o.close, s.Stop)
		o.sentinels, o.master = s, master
		o.sentinelGroup = append([]*servers.Redis{master}, o.sentinelGroup...)
		c.redis = "sentinel://" + strings.Join(s.Addrs(), ",") + "/" + s.Name()
	}
	var start func() (database, error)
	switch c.db {
	case dbSpawnMariaDB:
		start = func() (database, error) { return servers.StartMariaDB() }
	case dbSpawnPostgres:
		start = func() (database, error) { return servers.StartPostgres() }
	}
	if start != nil {
		srv, err := start()
		if err != nil {
			return o, err
		}
		o.close = append(o.close, srv.Close)
		if c.db, err = srv.CreateDatabase("bench"); err != nil {
			return o, err
		}
		o.db = srv
	}
	switch {
	case c.fault == "netem":
		return o, o.badNetwork(c)
	case c.nemesis && len(o.redisAddrs()) > 0:
		return o, o.routeRedis(c)
	}
	return o, nil
}

// redisAddrs are the addresses of the Redis servers and sentinels bench started.
func (o *owned) redisAddrs() []string {
	var addrs []string
	if r, ok := o.redis.(*servers.Redis); ok {
		addrs = append(addrs, r.Addr())
	}
	if o.cluster != nil {
		addrs = append(addrs, o.cluster.Addrs()...)
	}
	for _, r := range o.sentinelGroup {
		addrs = append(addrs, r.Addr())
	}
	if o.sentinels != nil {
		addrs = append(addrs, o.sentinels.Addrs()...)
	}
	return addrs
}

// routeRedis puts a netfault proxy before every Redis server and sentinel bench started, and
// routes the nodes through them (c.redisVia, SECKILL_LAB_REDIS_VIA): the nemesis's bad networks
// strike every link between a node and Redis, and none between the servers (the cluster bus,
// replication, the sentinels' watch), nor bench's own.
func (o *owned) routeRedis(c *benchConfig) error {
	c.redisVia = map[string]string{}
	for _, addr := range o.redisAddrs() {
		p, err := netfault.Start(addr)
		if err != nil {
			return err
		}
		o.close = append(o.close, p.Close)
		o.proxies = append(o.proxies, p)
		c.redisVia[addr] = p.Addr()
	}
	return nil
}

// injectNet switches the bad network kind on in every proxy (200 ms each way for a latency);
// its heal switches them all off.
func (o *owned) injectNet(kind string) (func(context.Context) error, error) {
	heal := func(context.Context) error {
		var errs []error
		for _, p := range o.proxies {
			errs = append(errs, p.Heal())
		}
		return errors.Join(errs...)
	}
	for _, p := range o.proxies {
		if err := p.Inject(kind, 200*time.Millisecond); err != nil {
			return nil, errors.Join(err, heal(context.Background()))
		}
	}
	return heal, nil
}

// badNetwork puts a netfault proxy before the dependency c.netemLink names and points c at it.
func (o *owned) badNetwork(c *benchConfig) error {
	target := &c.redis
	if c.netemLink == "db" {
		target = &c.db
	}
	u, err := url.Parse(*target)
	if err != nil || u.Host == "" {
		return fmt.Errorf("--fault netem: %q has no host:port to proxy", *target)
	}
	p, err := netfault.Start(u.Host)
	if err != nil {
		return err
	}
	o.close = append(o.close, p.Close)
	u.Host = p.Addr()
	o.proxies, *target = []*netfault.Proxy{p}, u.String()
	return nil
}

// fault returns how to make c's fault when it strikes a server bench started, nil when it
// strikes a node of the fleet.
func (o *owned) fault(c benchConfig) func(context.Context, string) error {
	restart := func(s restartable, pause time.Duration) func(context.Context, string) error {
		return func(ctx context.Context, _ string) error {
			s.Kill()
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
			return s.Restart()
		}
	}
	switch c.fault {
	case "redis":
		return restart(o.redis, 0)
	case "db":
		return restart(o.db, c.faultFor)
	case "redis-failover":
		return o.clusterFailover
	case "sentinel-failover":
		return o.sentinelFailover
	case "reshard":
		return o.reshard
	case "netem":
		return func(ctx context.Context, _ string) error {
			heal, err := o.injectNet(c.netem)
			if err != nil {
				return err
			}
			select {
			case <-ctx.Done():
			case <-time.After(c.faultFor):
			}
			return heal(ctx)
		}
	}
	return nil
}

// clusterFailover kills the master of the activity's slot and returns once its replica has
// taken the slot over; the dead node is then restarted on its AOF and rejoins as a replica.
func (o *owned) clusterFailover(ctx context.Context, activity string) error {
	slot, master, err := o.slotMaster(activity)
	if err != nil {
		return err
	}
	o.cluster.Node(master).Kill()
	if _, err := o.cluster.WaitMaster(slot, master, failoverTimeout); err != nil {
		return err
	}
	return o.cluster.Node(master).Restart()
}

// sentinelFailover kills the master and returns once the sentinels have named another; the dead
// server is then restarted, and the sentinels make it a replica.
func (o *owned) sentinelFailover(ctx context.Context, _ string) error {
	master, err := o.sentinels.Master()
	if err != nil {
		return err
	}
	if master != o.master.Addr() {
		return fmt.Errorf("sentinel-failover: the sentinels name %s, not the master bench started", master)
	}
	o.master.Kill()
	if _, err := o.sentinels.WaitMaster(master, failoverTimeout); err != nil {
		return err
	}
	return o.master.Restart()
}

// reshard moves the activity's slot to the next master, key by key, as redis-cli --cluster
// reshard does.
func (o *owned) reshard(ctx context.Context, activity string) error {
	slot, master, err := o.slotMaster(activity)
	if err != nil {
		return err
	}
	top, err := o.cluster.Topology()
	if err != nil {
		return err
	}
	for step := 1; step < o.cluster.Len(); step++ {
		to := (master + step) % o.cluster.Len()
		for _, n := range top {
			if n.Master && len(n.Slots) > 0 && n.Addr == o.cluster.Node(to).Addr() {
				return o.cluster.MigrateSlot(slot, to, 20*time.Millisecond)
			}
		}
	}
	return errors.New("reshard: no other master to move the slot to")
}

// slotMaster returns the slot of activity's keys and the node that is its master.
func (o *owned) slotMaster(activity string) (slot, master int, err error) {
	if slot, err = o.cluster.Slot("{act:" + activity + "}"); err != nil {
		return 0, 0, err
	}
	if master, err = o.cluster.MasterOf(slot); err == nil && master < 0 {
		err = fmt.Errorf("no master serves slot %d", slot)
	}
	return slot, master, err
}

// startStripeMock starts stripe-mock for bench --provider stripe: Stripe's API for the servers.
func startStripeMock(dir string) (string, func(), error) {
	m, err := servers.StartStripeMock(dir)
	if err != nil {
		return "", nil, err
	}
	return m.URL(), m.Stop, nil
}
