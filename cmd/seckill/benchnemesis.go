//go:build !release

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"seckill/internal/bench"
	"seckill/internal/netfault"
	"seckill/internal/node"
	"seckill/internal/servers"
)

// syncTimeout bounds the wait for a Cluster's replicas to be in sync before a failover is struck.
const syncTimeout = time.Minute

// striker returns how the nemesis strikes the deployment bench started: the nodes of fleet (the
// API nodes by their index in client, the workers by theirs among the workers) and the servers
// of o. Each strike returns its heal, which returns once the struck part is back.
func (o *owned) striker(fleet *bench.Fleet, fleetIndex []int, client *bench.Client) func(context.Context, bench.Strike, string) (func(context.Context) error, error) {
	workers := fleet.Indexes(node.RoleWorker)
	none := func(context.Context) error { return nil }
	return func(ctx context.Context, s bench.Strike, activity string) (func(context.Context) error, error) {
		switch s.Kind {
		case bench.KillAPI, bench.KillWorker:
			i, api := fleetIndex[s.Target%len(fleetIndex)], s.Kind == bench.KillAPI
			if !api {
				i = workers[s.Target%len(workers)]
			}
			fleet.Kill(i)
			return func(ctx context.Context) error {
				base, err := fleet.Restart(ctx, i)
				if err == nil && api {
					client.SetBase(s.Target%len(fleetIndex), base) // the crowd comes back to it
				}
				return err
			}, nil
		case bench.StopAPI, bench.StopWorker:
			i := fleetIndex[s.Target%len(fleetIndex)]
			if s.Kind == bench.StopWorker {
				i = workers[s.Target%len(workers)]
			}
			if err := fleet.Pause(i); err != nil {
				return nil, err
			}
			return func(context.Context) error { return fleet.Resume(i) }, nil
		case bench.SkewAPI, bench.SkewWorker:
			i := fleetIndex[s.Target%len(fleetIndex)]
			if s.Kind == bench.SkewWorker {
				i = workers[s.Target%len(workers)]
			}
			if err := fleet.Skew(ctx, i, s.Skew); err != nil {
				return nil, err
			}
			return func(ctx context.Context) error { return fleet.Skew(ctx, i, 0) }, nil
		case bench.KillRedis:
			o.redis.Kill()
			return func(context.Context) error { return o.redis.Restart() }, nil
		case bench.ClusterFailover:
			return o.strikeClusterMaster(activity)
		case bench.SentinelFailover:
			return o.strikeSentinelMaster()
		case bench.KillReplica:
			return o.strikeReplica(activity)
		case bench.Reshard:
			return none, o.reshard(ctx, activity)
		case bench.DBOutage:
			o.db.Kill()
			return func(context.Context) error { return o.db.Restart() }, nil
		case bench.NetLatency, bench.NetReset, bench.NetPartition:
			return o.injectNet(map[string]string{bench.NetLatency: netfault.Latency, bench.NetReset: netfault.Reset, bench.NetPartition: netfault.HalfOpen}[s.Kind])
		}
		return nil, fmt.Errorf("the nemesis cannot strike %q here", s.Kind)
	}
}

// strikeClusterMaster kills the master of activity's slot, once every replica is in sync (a
// replica still syncing after the last failover cannot take over); the heal returns once its
// replica has taken the slot over and the dead node is restarted, to rejoin as a replica.
func (o *owned) strikeClusterMaster(activity string) (func(context.Context) error, error) {
	if err := o.cluster.WaitReplicas(syncTimeout); err != nil {
		return nil, err
	}
	slot, master, err := o.slotMaster(activity)
	if err != nil {
		return nil, err
	}
	o.cluster.Node(master).Kill()
	return func(context.Context) error {
		if _, err := o.cluster.WaitMaster(slot, master, failoverTimeout); err != nil {
			return err
		}
		return o.cluster.Node(master).Restart()
	}, nil
}

// strikeSentinelMaster kills the server the sentinels name master, whichever it is after the
// failovers before, once its replicas are in sync (as strikeClusterMaster: Sentinel may promote a
// replica still in its first sync, which has not the master's data; a failure then is outside
// the deployment's promise); the heal returns once they name another, the dead one is
// restarted, to become a replica, and the new master has the replicas every write waits for.
func (o *owned) strikeSentinelMaster() (func(context.Context) error, error) {
	addr, err := o.sentinels.WaitInSync(len(o.sentinelGroup)-1, syncTimeout)
	if err != nil {
		return nil, err
	}
	var master *servers.Redis
	for _, r := range o.sentinelGroup {
		if r.Addr() == addr {
			master = r
		}
	}
	if master == nil {
		return nil, errors.New("sentinel-failover: the sentinels name a master bench did not start: " + addr)
	}
	master.Kill()
	return func(context.Context) error {
		if _, err := o.sentinels.WaitMaster(addr, failoverTimeout); err != nil {
			return err
		}
		if err := master.Restart(); err != nil {
			return err
		}
		// Over once the new master has the replicas every write waits for (--min-replicas):
		// before that, the writes are refused BUSY, as the deployment promises, and the heal's
		// clock must not run (Sentinel seed 3: its remaining replica took a second to sync).
		_, err := o.sentinels.WaitInSync(o.minReplicas, syncTimeout)
		return err
	}, nil
}

// strikeReplica kills a replica alone: on a Cluster one of the activity's master's, on Sentinel
// one of the master's. The master keeps another (bench starts two a master), so the writes that
// wait for one replica still get it; the heal restarts the dead one, to sync again.
func (o *owned) strikeReplica(activity string) (func(context.Context) error, error) {
	var replica *servers.Redis
	switch {
	case o.cluster != nil:
		if err := o.cluster.WaitReplicas(syncTimeout); err != nil {
			return nil, err
		}
		_, master, err := o.slotMaster(activity)
		if err != nil {
			return nil, err
		}
		i, err := o.cluster.ReplicaOf(master)
		if err != nil || i < 0 {
			return nil, fmt.Errorf("kill-replica: no replica of node %d (%v)", master, err)
		}
		replica = o.cluster.Node(i)
	case o.sentinels != nil:
		master, err := o.sentinels.WaitInSync(len(o.sentinelGroup)-1, syncTimeout)
		if err != nil {
			return nil, err
		}
		var replicas []*servers.Redis
		for _, r := range o.sentinelGroup {
			if r.Addr() != master {
				replicas = append(replicas, r)
			}
		}
		if len(replicas) > 0 { // one of them by the activity, so that each is struck in turn
			replica = replicas[int(activity[len(activity)-1])%len(replicas)]
		}
	}
	if replica == nil {
		return nil, errors.New("kill-replica: bench started no replica here")
	}
	replica.Kill()
	return func(context.Context) error { return replica.Restart() }, nil
}

// badNetworks reports whether proxies stand before Redis, for the nemesis's bad networks.
func (o *owned) badNetworks() bool { return len(o.proxies) > 0 }

// saveLogs copies the logs of the servers bench started (Redis servers, sentinels, the database)
// into dir, named by kind and address, so that a failing seed's servers can be read after bench
// removed them: the nodes' own logs are on bench's stderr. It returns dir, or an error.
func (o *owned) saveLogs(dir string) (string, error) {
	type logged interface{ LogPath() string }
	logs := map[string]string{} // name in dir → path
	addRedis := func(kind string, r *servers.Redis) {
		if r != nil {
			logs[fmt.Sprintf("%s-%d.log", kind, r.Port())] = r.LogPath()
		}
	}
	if r, ok := o.redis.(*servers.Redis); ok {
		addRedis("redis", r)
	}
	if o.cluster != nil {
		for i := range o.cluster.Len() {
			addRedis("redis", o.cluster.Node(i))
		}
	}
	for _, r := range o.sentinelGroup {
		addRedis("redis", r)
	}
	if o.sentinels != nil {
		for i, p := range o.sentinels.LogPaths() {
			logs[fmt.Sprintf("sentinel-%d.log", i)] = p
		}
	}
	if db, ok := o.db.(logged); ok {
		logs["database.log"] = db.LogPath()
	}
	if len(logs) == 0 {
		return "", errors.New("bench started no servers")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for name, path := range logs {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}
