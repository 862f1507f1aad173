package redisstore

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// Topology tells the errors of a Redis deployment that fails over (a Redis Cluster, Sentinel)
// apart: the ones that say it is changing shape from the ones that say it is failing. Its
// Classify has the shape of breaker.Topology, for the guard of the gate's backend; it also makes
// the cluster client look at the cluster again, at once, instead of at its next periodic refresh:
// go-redis reloads the slot map by itself only on MOVED and ASK, never when the master it knows
// refuses connections, so after a failover it kept calling the dead master until the refresh.
type Topology struct {
	reload func() // asks the client to reload its view of the cluster; nil for Sentinel
}

// NewTopology returns the Topology of rdb, or nil when rdb is one server with no failover: its
// refused connections are an outage, for the breaker to see. A nil Topology classifies nothing.
func NewTopology(rdb redis.UniversalClient) *Topology {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return &Topology{reload: func() { c.ReloadState(context.Background()) }}
	case *redis.Client:
		if failover(c) {
			return &Topology{} // the Sentinel client asks the sentinels on every new connection
		}
	}
	return nil
}

// Classify reports whether err is a topology event (moving) and whether the command it answers
// was not carried out (retry): a connection refused, a redirect, a slot in migration, a cluster
// or replica without a master, a server loading its data. A connection lost with the command on
// it (a master killed mid-call) is moving too, but it may have run: only an idempotent caller may
// send it again. A timeout is not moving: a server that hangs is failing.
func (t *Topology) Classify(err error) (moving, retry bool) {
	if t == nil || err == nil {
		return false, false
	}
	switch {
	case refused(err), redis.IsTryAgainError(err), redis.IsClusterDownError(err), redis.IsLoadingError(err),
		redis.IsReadOnlyError(err), redis.IsMasterDownError(err), moved(err):
		moving, retry = true, true
	case lost(err):
		moving = true
	}
	if moving && t.reload != nil {
		t.reload() // coalesced by the client: at most one reload at a time, then one more
	}
	return moving, retry
}

// refused reports whether err is a connection that was never made: nothing was sent.
func refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func moved(err error) bool {
	_, isMoved := redis.IsMovedError(err)
	_, isAsk := redis.IsAskError(err)
	return isMoved || isAsk
}

// lost reports whether err is a connection broken under a command: the server died or closed it.
func lost(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}

// Ping checks that Redis answers: every master of a cluster (a cluster with a master down cannot
// sell what that master holds), the one server otherwise.
func Ping(ctx context.Context, rdb redis.UniversalClient) error {
	if c, ok := rdb.(*redis.ClusterClient); ok {
		return c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.Ping(ctx).Err() })
	}
	return rdb.Ping(ctx).Err()
}
