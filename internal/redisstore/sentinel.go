package redisstore

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// masterDialer is the dialer of a Sentinel client (go-redis's FailoverOptions.Dialer): go-redis
// calls it with the master's address, which it has just asked a sentinel for, and with a
// sentinel's address when it reaches the sentinels themselves.
//
// go-redis's pool counts the dials that fail, and once it has counted as many as it has
// connections it stops dialling: every call is answered the last dial error at once, until a
// probe it sends once a second connects (redis/go-redis#3062). A master killed under a crowd
// fills that count within the sentinels' down-after, and the nodes went on answering the dead
// master's "connection refused" for up to a second after every sentinel had named the new one
// (the nemesis's Sentinel seed 47; 0.71 to 0.75 s in three runs of a test like
// TestSentinelClientFollowsAFailoverAtOnce with go-redis's own dialer).
// So a dial of the master the sentinels name that fails does not fail: it returns a connection
// that answers the dial's error to the first thing written on it (refusedConn). The call fails as
// before, with the same error, before anything was sent (the guard retries it as a failover), and
// the pool, which counted nothing, dials the master the sentinels name at the next call.
//
// A refused master the sentinels no longer name (go-redis asked one that has not heard of the
// failover yet) is dialled again at the one they name. A refused sentinel fails as a dial.
type masterDialer struct {
	master    string         // the name the sentinels watch it under
	sentinels []string       // their addresses
	sentinel  *redis.Options // the options of a client of one sentinel, its Addr left blank
	tls       *tls.Config    // nil: plain TCP

	asking chan struct{} // a lock a dial can stop waiting for: held by the dial asking the sentinels
	last   named         // their last answer, which the dials failing meanwhile reuse; under asking
}

// named is the master the sentinels named, and when they were asked.
type named struct {
	addr string
	at   time.Time
}

// askEvery is how long the sentinels' answer serves the dials that fail meanwhile: a crowd's
// dials of a dead master ask them once per askEvery, not once each.
const askEvery = 20 * time.Millisecond

func newMasterDialer(s Spec) *masterDialer {
	return &masterDialer{
		master: s.Master, sentinels: s.Addrs, tls: s.TLS,
		sentinel: &redis.Options{Username: s.SentinelUsername, Password: s.SentinelPassword, TLSConfig: s.TLS,
			DialTimeout: dialTimeout, DialerRetries: 1, MaxRetries: -1, PoolSize: 1, DisableIdentity: true,
			ContextTimeoutEnabled: true},
		asking: make(chan struct{}, 1),
	}
}

// Dial connects to addr; if that fails, see masterDialer.
func (d *masterDialer) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := d.connect(ctx, network, addr)
	if err == nil || !refused(err) {
		return conn, err
	}
	now, asked := d.namedMaster(ctx)
	switch {
	case !asked:
		return nil, err
	case now == addr:
	case d.knows(ctx, addr): // the master they failed over: dial the one they name now
		if conn, err = d.connect(ctx, network, now); err == nil || !refused(err) {
			return conn, err
		}
		addr = now
	default: // a sentinel
		return nil, err
	}
	return newRefusedConn(err, remoteAddr{network, addr}), nil
}

// connect dials addr once, with TLS if the spec asks for it.
func (d *masterDialer) connect(ctx context.Context, network, addr string) (net.Conn, error) {
	nd := &net.Dialer{Timeout: dialTimeout}
	if d.tls == nil {
		return nd.DialContext(ctx, network, addr)
	}
	return (&tls.Dialer{NetDialer: nd, Config: d.tls}).DialContext(ctx, network, addr)
}

// refusedConn is a connection to a master that could not be made: its reads and writes answer
// the dial's error, which still says "dial" (topology's refused: nothing was sent).
type refusedConn struct {
	err    error
	remote net.Addr
}

// newRefusedConn returns the refusedConn of a dial that failed with err. go-redis unwraps the
// error of a new connection's first command once (its initPooledConn): err is wrapped once more
// for it, so that the caller gets the dial's *net.OpError, as from a dial that failed.
func newRefusedConn(err error, remote net.Addr) refusedConn {
	return refusedConn{err: fmt.Errorf("%w", err), remote: remote}
}

func (c refusedConn) Read([]byte) (int, error)         { return 0, c.err }
func (c refusedConn) Write([]byte) (int, error)        { return 0, c.err }
func (c refusedConn) Close() error                     { return nil }
func (c refusedConn) LocalAddr() net.Addr              { return remoteAddr{c.remote.Network(), ""} }
func (c refusedConn) RemoteAddr() net.Addr             { return c.remote }
func (c refusedConn) SetDeadline(time.Time) error      { return nil }
func (c refusedConn) SetReadDeadline(time.Time) error  { return nil }
func (c refusedConn) SetWriteDeadline(time.Time) error { return nil }

// remoteAddr is the address a refusedConn was to reach (go-redis drops the connections whose
// RemoteAddr is not the new master's after a failover).
type remoteAddr struct{ network, addr string }

func (a remoteAddr) Network() string { return a.network }
func (a remoteAddr) String() string  { return a.addr }

// namedMaster returns the address the first sentinel that answers names as master: the answer
// of a dial that asked less than askEvery ago, or a new one. asked is false when no sentinel
// answered (or ctx ended first).
func (d *masterDialer) namedMaster(ctx context.Context) (addr string, asked bool) {
	select {
	case d.asking <- struct{}{}:
	case <-ctx.Done():
		return "", false
	}
	defer func() { <-d.asking }()
	if !d.last.at.IsZero() && time.Since(d.last.at) < askEvery {
		return d.last.addr, true
	}
	for _, s := range d.sentinels {
		addr, err := d.ask(ctx, s)
		if err == nil {
			d.last = named{addr: addr, at: time.Now()}
			return addr, true
		}
		if ctx.Err() != nil {
			break
		}
	}
	return "", false
}

// knows reports whether the first sentinel that answers knows addr as the master it watches or
// one of its replicas (where it lists a master it failed over, once the failover is done): a
// data node, not a sentinel.
func (d *masterDialer) knows(ctx context.Context, addr string) bool {
	for _, s := range d.sentinels {
		c := d.client(s)
		m, err := c.Master(ctx, d.master).Result()
		var replicas []map[string]string
		if err == nil {
			replicas, err = c.Replicas(ctx, d.master).Result()
		}
		c.Close()
		if err != nil {
			continue
		}
		for _, n := range append(replicas, m) {
			if net.JoinHostPort(n["ip"], n["port"]) == addr {
				return true
			}
		}
		return false
	}
	return false
}

// client is a client of the sentinel at addr, for one question: close it after.
func (d *masterDialer) client(addr string) *redis.SentinelClient {
	o := *d.sentinel
	o.Addr = addr
	return redis.NewSentinelClient(&o)
}

// ask asks the sentinel at addr which master it names.
func (d *masterDialer) ask(ctx context.Context, addr string) (string, error) {
	c := d.client(addr)
	defer c.Close()
	hp, err := c.GetMasterAddrByName(ctx, d.master).Result()
	if err != nil {
		return "", err
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("sentinel %s: GET-MASTER-ADDR-BY-NAME answered %q", addr, hp)
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}
