package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// masterDialer makes every connection of a Sentinel client: a go-redis client of one server
// whose dialer this is, the address it brings ignored. Each dial connects to the master the
// sentinels' newest configuration names, and to none while they fail it over; a dial that cannot
// be made does not fail. Three defects of the nemesis's made it so.
//
// A master the sentinels fail over may come back before they have made it a replica: its
// supervisor restarts it, and it starts as the master its configuration file says it is. go-redis
// asks one sentinel, and a sentinel that has not heard of the failover yet (the others hear from
// the one that ran it a moment after it promoted the replica) names the restarted server. A
// replica not yet told of the new master syncs from it again, so a write there is acknowledged
// by WAIT, and lost once the sentinels make both replicas of the new master: the nemesis's
// Sentinel seed 85 lost 21 acknowledged grabs, 8 places in a waiting line and the records of 5
// users (who then won a second unit) that way, in the 50 ms between the restart and the other
// sentinels hearing. So a dial asks every sentinel (view): the one whose configuration epoch is
// the newest names the master, and while a sentinel at that epoch fails the master over and has
// not promoted a replica yet, or two there name different masters, no master is dialled.
//
// go-redis's pool counts the dials that fail, and once it has counted as many as it has
// connections it stops dialling: every call is answered the last dial error at once, until a
// probe it sends once a second connects (redis/go-redis#3062). A master killed under a crowd
// fills that count within the sentinels' down-after, and the nodes went on answering the dead
// master's "connection refused" for up to a second after every sentinel had named the new one
// (the nemesis's Sentinel seed 47; 0.71 to 0.75 s in three runs of a test like
// TestSentinelClientFollowsAFailoverAtOnce with go-redis's own dialer). So a dial that cannot be
// made, refused, or of a master the sentinels fail over, or with no master named, does not
// fail: it returns a connection that answers why to the first thing written on it (refusedConn).
// The call fails as a refused dial would, before anything was sent (the guard retries it as a
// failover), and the pool, which counted nothing, dials again at the next call.
//
// go-redis's own Sentinel client (its failover client) asks a sentinel itself before each dial,
// and counts its failure as a failed dial: a bad network between a node and the sentinels
// filled the count, and once it healed the node answered the stale "all sentinels are
// unreachable" for a second more (the nemesis's Sentinel seed 201, a node refusing 1.009 s
// after a reset healed). So the client is a plain one, and this dialer its only way to a server.
type masterDialer struct {
	master    string         // the name the sentinels watch it under
	sentinels []string       // their addresses
	sentinel  *redis.Options // the options of a client of one sentinel, its Addr left blank
	r         router         // how a server is dialled

	asking chan struct{} // a lock a dial can stop waiting for: held by the dial asking the sentinels
	last   view          // their last answer, which the dials meanwhile reuse; under asking
}

// view is what the sentinels said of the master, and when.
type view struct {
	at          time.Time
	answered    bool   // a sentinel answered
	master      string // the master the newest configuration names
	failingOver bool   // a sentinel of the newest fails it over, no replica promoted yet; or they disagree
}

// said is one sentinel's answer.
type said struct {
	epoch       int64  // its configuration's epoch
	named       string // the master it names: once it has promoted a replica in a failover it runs, that replica
	failingOver bool   // it fails the master over and has not promoted a replica yet
}

// askEvery is how long the sentinels' answer serves the dials meanwhile: a crowd's dials ask
// them once per askEvery, not once each. askWithin bounds one round of questions: a sentinel
// that has not answered by then is left out.
const (
	askEvery  = 20 * time.Millisecond
	askWithin = 250 * time.Millisecond
)

// errFailingOver is the refusal of a dial while the sentinels fail the master over.
var errFailingOver = errors.New("the sentinels are failing the master over")

// newMasterDialer dials the master and the sentinels of s as r does.
func newMasterDialer(s Spec, r router) *masterDialer {
	return &masterDialer{
		master: s.Master, sentinels: s.Addrs, r: r,
		sentinel: &redis.Options{Username: s.SentinelUsername, Password: s.SentinelPassword, TLSConfig: s.TLS,
			DialTimeout: dialTimeout, DialerRetries: 1, MaxRetries: -1, PoolSize: 1, DisableIdentity: true,
			ContextTimeoutEnabled: true, Dialer: r.dialer()},
		asking: make(chan struct{}, 1),
	}
}

// errNoMaster is the refusal of a dial when no sentinel has named a master yet.
var errNoMaster = errors.New("no sentinel answered with the master")

// Dial connects to the master the sentinels name (see masterDialer); addr is not looked at.
func (d *masterDialer) Dial(ctx context.Context, network, _ string) (net.Conn, error) {
	v := d.view(ctx)
	to := remoteAddr{network, v.master}
	switch {
	case v.failingOver:
		return newRefusedConn(&net.OpError{Op: "dial", Net: network, Addr: to, Err: errFailingOver}, to), nil
	case v.master == "":
		return newRefusedConn(&net.OpError{Op: "dial", Net: network, Addr: to, Err: errNoMaster}, to), nil
	}
	conn, err := d.r.dial(ctx, network, v.master)
	if err != nil {
		if !refused(err) { // a handshake that failed: refused too, as nothing was sent
			err = &net.OpError{Op: "dial", Net: network, Addr: to, Err: err}
		}
		return newRefusedConn(err, to), nil
	}
	return conn, nil
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

// SyscallConn fails: go-redis's pool checks a connection it kept idle through its socket, so it
// drops a refusedConn it kept (dialled for a call that had given up by then) rather than hand a
// later call a refusal that may be stale; that call dials anew. (go-redis's failover client
// closed them at the sentinels' news of a failover; TestSentinelClientFollowsAFailoverAtOnce
// met one once every sentinel named the new master.)
func (c refusedConn) SyscallConn() (syscall.RawConn, error) { return nil, c.err }

// remoteAddr is the address a refusedConn was to reach, its RemoteAddr (a dial's error names
// it too): the master the sentinels named, or none.
type remoteAddr struct{ network, addr string }

func (a remoteAddr) Network() string { return a.network }
func (a remoteAddr) String() string  { return a.addr }

// view returns what the sentinels say of the master: the answer of a dial that asked less than
// askEvery ago, or a new one, every sentinel asked at once. Its answered is false when none
// answered within askWithin, and its master then the one they named last; when ctx ends first,
// it is empty.
func (d *masterDialer) view(ctx context.Context) view {
	select {
	case d.asking <- struct{}{}:
	case <-ctx.Done():
		return view{}
	}
	defer func() { <-d.asking }()
	if !d.last.at.IsZero() && time.Since(d.last.at) < askEvery {
		return d.last
	}
	ask, cancel := context.WithTimeout(ctx, askWithin)
	defer cancel()
	answers := make([]*said, len(d.sentinels))
	var wg sync.WaitGroup
	for i, s := range d.sentinels {
		wg.Go(func() {
			if a, err := d.ask(ask, s); err == nil {
				answers[i] = &a
			}
		})
	}
	wg.Wait()
	var got []said
	for _, a := range answers {
		if a != nil {
			got = append(got, *a)
		}
	}
	next := viewOf(got, time.Now())
	if !next.answered { // none answered: the master they named last, if any
		next.master = d.last.master
	}
	d.last = next
	return d.last
}

// viewOf is what the sentinels' answers say of the master (see masterDialer): the newest
// configuration's master, unless a sentinel of the newest fails it over and has not promoted a
// replica yet, or they name different masters.
func viewOf(answers []said, at time.Time) view {
	v := view{at: at, answered: len(answers) > 0}
	newest := int64(-1)
	for _, a := range answers {
		newest = max(newest, a.epoch)
	}
	for _, a := range answers {
		switch {
		case a.epoch < newest: // it has not heard of a promotion another made
		case a.failingOver:
			v.failingOver = true
		case v.master == "":
			v.master = a.named
		case a.named != v.master: // one has promoted a replica since the other's epoch was read
			v.failingOver = true
		}
	}
	return v
}

// client is a client of the sentinel at addr, for one question: close it after.
func (d *masterDialer) client(addr string) *redis.SentinelClient {
	o := *d.sentinel
	o.Addr = addr
	return redis.NewSentinelClient(&o)
}

// ask asks the sentinel at addr what it says of the master: GET-MASTER-ADDR-BY-NAME names the
// replica it promoted in a failover it runs, SENTINEL MASTER has its epoch, whether it fails the
// master over and the master it had.
func (d *masterDialer) ask(ctx context.Context, addr string) (said, error) {
	c := d.client(addr)
	defer c.Close()
	hp, err := c.GetMasterAddrByName(ctx, d.master).Result()
	if err != nil {
		return said{}, err
	}
	if len(hp) != 2 {
		return said{}, fmt.Errorf("sentinel %s: GET-MASTER-ADDR-BY-NAME answered %q", addr, hp)
	}
	m, err := c.Master(ctx, d.master).Result()
	if err != nil {
		return said{}, err
	}
	epoch, err := strconv.ParseInt(m["config-epoch"], 10, 64)
	if err != nil {
		return said{}, fmt.Errorf("sentinel %s: SENTINEL MASTER answered config-epoch %q", addr, m["config-epoch"])
	}
	a := said{epoch: epoch, named: net.JoinHostPort(hp[0], hp[1])}
	had := net.JoinHostPort(m["ip"], m["port"])
	// Read in this order, a promotion between the questions shows as a failover not done yet.
	a.failingOver = a.named == had && slices.Contains(strings.Split(m["flags"], ","), "failover_in_progress")
	return a, nil
}
