package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// clicker is the crowd's own HTTP/1.1 client for its clicks: one connection a request in flight,
// kept open between requests, each request written with one write and its answer read by the
// standard library's parser (http.ReadResponse). The crowd's clicks are the one thing bench sends
// in bulk, on the same cores as the server it times, and net/http's Transport hands every request
// and answer between three goroutines: with it the load generator spent more CPU a click than the
// server answering it (docs/BENCHMARKS.md §13). Everything else bench sends (the admin's calls,
// the checker's reads) goes through net/http.
type clicker struct {
	timeout time.Duration // of one request, from its write to the end of its answer
	dialer  net.Dialer

	mu   sync.Mutex
	idle map[string][]*clickConn // base URL -> idle connections, the latest used last
}

// A connection opened ahead of a crowd (open) and never used is handed out for freshFor: the
// server closes a connection that sends no request within its read timeout (5 s). One that has
// answered is kept while idle for idleFor, as net/http's Transport keeps them.
const (
	freshFor = time.Second
	idleFor  = 90 * time.Second
)

type clickConn struct {
	conn   net.Conn
	raw    syscall.RawConn // the TCP connection under conn, for alive's peek
	target target
	br     *bufio.Reader
	req    []byte // the request being written
	idleAt time.Time
	used   bool // has answered a request: idleFor applies, not freshFor
	pooled bool // taken from the idle connections, not dialed for this request
}

// target is where a base URL's requests go.
type target struct {
	addr   string // host:port to dial
	host   string // the Host header
	prefix string // the base's path, before the request's
	tls    bool
}

func targetOf(base string) (target, error) {
	u, err := url.Parse(base)
	if err != nil {
		return target{}, err
	}
	return target{addr: hostPort(u), host: u.Host, prefix: u.EscapedPath(), tls: u.Scheme == "https"}, nil
}

// hostPort is the address to dial for u: its host and port, the scheme's port when it names none.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	port := 80
	if u.Scheme == "https" {
		port = 443
	}
	return net.JoinHostPort(u.Hostname(), strconv.Itoa(port))
}

func newClicker(timeout time.Duration) *clicker {
	return &clicker{timeout: timeout, dialer: net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second},
		idle: map[string][]*clickConn{}}
}

// get returns an idle connection to base that is still open, or dials one.
func (w *clicker) get(ctx context.Context, base string) (*clickConn, error) {
	for {
		now := time.Now()
		w.mu.Lock()
		cs := w.idle[base]
		if len(cs) == 0 {
			w.mu.Unlock()
			return w.dial(ctx, base)
		}
		wc := cs[len(cs)-1]
		w.idle[base] = cs[:len(cs)-1]
		w.mu.Unlock()
		if age := now.Sub(wc.idleAt); (age < freshFor || (wc.used && age < idleFor)) && wc.alive() {
			wc.pooled = true
			return wc, nil
		}
		wc.conn.Close()
	}
}

// alive reports whether the server has not closed wc while it was idle (a node killed, an idle
// timeout): the check net/http's Transport makes with a read in the background, made here as the
// connection is taken, by a peek that must find nothing to read and no end.
func (wc *clickConn) alive() bool {
	if wc.br.Buffered() > 0 {
		return false // an answer nobody asked for
	}
	if wc.raw == nil {
		return true
	}
	open := false
	var b [1]byte
	err := wc.raw.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = errors.Is(err, syscall.EAGAIN)
		return true // never wait
	})
	return err == nil && open
}

func (w *clicker) dial(ctx context.Context, base string) (*clickConn, error) {
	t, err := targetOf(base)
	if err != nil {
		return nil, err
	}
	conn, err := w.dialer.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, err
	}
	var raw syscall.RawConn
	if sc, ok := conn.(syscall.Conn); ok {
		raw, _ = sc.SyscallConn()
	}
	if t.tls {
		host, _, _ := net.SplitHostPort(t.addr)
		tc := tls.Client(conn, &tls.Config{ServerName: host, NextProtos: []string{"http/1.1"}})
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		conn = tc
	}
	return &clickConn{conn: conn, raw: raw, target: t, br: bufio.NewReaderSize(conn, 4096), idleAt: time.Now()}, nil
}

// put keeps wc for the next request to base.
func (w *clicker) put(base string, wc *clickConn) {
	wc.idleAt = time.Now()
	w.mu.Lock()
	w.idle[base] = append(w.idle[base], wc)
	w.mu.Unlock()
}

// open dials connections to base ahead of a crowd, at most 32 at a time, until n are idle, and
// keeps those that could be made.
func (w *clicker) open(ctx context.Context, base string, n int) {
	w.mu.Lock()
	n -= len(w.idle[base])
	w.mu.Unlock()
	if n <= 0 {
		return
	}
	conns := make([]*clickConn, n)
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			conns[i], _ = w.dial(ctx, base)
		})
	}
	wg.Wait()
	for _, wc := range conns {
		if wc != nil {
			w.put(base, wc)
		}
	}
}

// close closes the idle connections.
func (w *clicker) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for base, cs := range w.idle {
		for _, wc := range cs {
			wc.conn.Close()
		}
		delete(w.idle, base)
	}
}

// maxAnswer bounds the body of an answer to a click.
const maxAnswer = 64 << 10

// answer is the server's answer to a click: its status, its body, and the Retry-After of a
// refusal (0 when it has none).
type answer struct {
	status int
	body   []byte
	retry  time.Duration
}

// post sends a POST without a body to path on base, with bearer's Authorization and, when key is
// not empty, that Idempotency-Key, and returns the answer. A cancelled ctx ends the request. An
// error from dialing is a *net.OpError of Op "dial" (see refused): nothing was sent.
func (w *clicker) post(ctx context.Context, base, path, bearer, key string) (answer, error) {
	wc, err := w.get(ctx, base)
	if err != nil {
		return answer{}, err
	}
	a, keep, err := wc.exchange(ctx, path, bearer, key, w.timeout)
	if err != nil && a.status == 0 && wc.pooled && key != "" && ctx.Err() == nil {
		// A kept connection the server closed as it was taken (its idle timeout, a restart): the
		// request goes again on a new one, as net/http's Transport sends again a request that
		// carries an Idempotency-Key. The key makes the second the first one's answer, if the
		// first was heard at all.
		wc.conn.Close()
		if wc, err = w.dial(ctx, base); err != nil {
			return answer{}, err
		}
		a, keep, err = wc.exchange(ctx, path, bearer, key, w.timeout)
	}
	if keep {
		w.put(base, wc)
	} else {
		wc.conn.Close()
	}
	return a, err
}

// exchange writes the request and reads its answer; keep says the connection can carry another.
func (wc *clickConn) exchange(ctx context.Context, path, bearer, key string, timeout time.Duration) (a answer, keep bool, err error) {
	wc.req = append(wc.req[:0], "POST "...)
	wc.req = append(wc.req, wc.target.prefix...)
	wc.req = append(wc.req, path...)
	wc.req = append(wc.req, " HTTP/1.1\r\nHost: "...)
	wc.req = append(wc.req, wc.target.host...)
	wc.req = append(wc.req, "\r\nUser-Agent: seckill-bench\r\nContent-Length: 0\r\nAuthorization: Bearer "...)
	wc.req = append(wc.req, bearer...)
	if key != "" {
		wc.req = append(wc.req, "\r\nIdempotency-Key: "...)
		wc.req = append(wc.req, key...)
	}
	wc.req = append(wc.req, "\r\n\r\n"...)

	if err := wc.conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return answer{}, false, err
	}
	stop := context.AfterFunc(ctx, func() { wc.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := wc.conn.Write(wc.req); err != nil {
		return answer{}, false, wc.failed(ctx, err)
	}
	resp, err := http.ReadResponse(wc.br, nil)
	if err != nil {
		return answer{}, false, wc.failed(ctx, err)
	}
	a.status = resp.StatusCode
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
		a.retry = time.Duration(s) * time.Second
	}
	a.body, err = io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	resp.Body.Close()
	switch {
	case err != nil:
		return answer{status: a.status}, false, wc.failed(ctx, err)
	case len(a.body) > maxAnswer:
		return answer{status: a.status}, false, fmt.Errorf("an answer of more than %d bytes", maxAnswer)
	}
	wc.used = true
	return a, !resp.Close, nil
}

// failed names err as net/http's client would: by the context's end when that cut it short.
func (wc *clickConn) failed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("the server closed the connection: %w", err)
	}
	return err
}
