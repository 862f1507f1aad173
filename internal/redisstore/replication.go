package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/sale"
)

// Replication is how far a write must have gone before it is acknowledged. Redis replicates
// asynchronously: a master answers before its replicas have the write, and a replica promoted
// after the master's death may lack what the master acknowledged, so a grab answered 202 could
// vanish and its unit be sold again. With Replicas > 0 every write a user is answered for (a
// grab, a unit taken on another shard, a release, a pass spent, a join) is followed by WAIT on
// the connection that ran it; the answer waits until that many replicas have the write, or
// Timeout passes and the answer is ErrBusy (the write stands on the master, and a retry with the
// same idempotency key gets its first answer once it has reached the replicas).
type Replication struct {
	Replicas int
	Timeout  time.Duration // default 500 ms, under the guard's 1 s deadline
}

// DefaultWaitTimeout is Replication's default Timeout.
const DefaultWaitTimeout = 500 * time.Millisecond

// errNotReplicated says a write did not reach enough replicas in time.
var errNotReplicated = errors.New("the write did not reach enough replicas in time")

// runScript runs s with keys and args and, when r asks for replicas, waits for them on the
// connection that ran it. via carries the call when no replica is asked for (the automatic
// pipeline of the gate's grabs, or the client); with replicas the call goes on a pipeline of its
// own to the master of keys[0], the script and WAIT together.
func (r Replication) runScript(ctx context.Context, rdb redis.UniversalClient, via redis.Scripter, s *redis.Script,
	keys []string, args ...any) *redis.Cmd {
	if r.Replicas <= 0 {
		return s.Run(ctx, via, keys, args...)
	}
	node, err := masterOf(ctx, rdb, keys[0])
	if err != nil {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(err)
		return cmd
	}
	for loaded := false; ; loaded = true {
		var run *redis.Cmd
		var wait *redis.IntCmd
		_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
			run = s.EvalSha(ctx, p, keys, args...)
			wait = r.waitCmd(ctx)
			_ = p.Process(ctx, wait)
			return nil
		})
		if redis.HasErrorPrefix(run.Err(), "NOSCRIPT") && !loaded {
			if err := s.Load(ctx, node).Err(); err != nil {
				return run
			}
			continue // a master that does not know the script yet (new, or promoted): once more
		}
		if run.Err() != nil || err != nil && wait.Err() == nil {
			return run // the script's own error, or the pipeline's (a connection lost)
		}
		if n, werr := wait.Result(); werr != nil || n < int64(r.Replicas) {
			cmd := redis.NewCmd(ctx)
			cmd.SetErr(fmt.Errorf("%w: %w: %d of %d replicas after %v (%v)", sale.ErrBusy, errNotReplicated, n, r.Replicas, r.timeout(), werr))
			return cmd
		}
		return run
	}
}

// timeout is how long a write waits for the replicas.
func (r Replication) timeout() time.Duration {
	if r.Timeout <= 0 {
		return DefaultWaitTimeout
	}
	return r.Timeout
}

// waitCmd is WAIT for r's replicas, to send after a write on the connection that made it.
func (r Replication) waitCmd(ctx context.Context) *redis.IntCmd {
	return redis.NewIntCmd(ctx, "wait", r.Replicas, r.timeout().Milliseconds())
}

// masterOf returns the client of the one server that holds key: its master in a cluster, the
// server (or Sentinel's master) otherwise.
func masterOf(ctx context.Context, rdb redis.UniversalClient, key string) (*redis.Client, error) {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	case *redis.Client:
		return c, nil
	}
	return nil, fmt.Errorf("redis client %T: cannot pin a write to its master", rdb)
}
