package bench

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/auth"
	"seckill/internal/httpapi/wire"
)

// TestOpenHandsTheCrowdItsConnections: the connections Open makes are the ones the crowd's first
// requests use, so that the crowd dials none of its own while it is timed.
func TestOpenHandsTheCrowdItsConnections(t *testing.T) {
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/activities/a/grab" || r.Header.Get("Authorization") != "Bearer token" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		time.Sleep(20 * time.Millisecond) // keep each request's connection busy while the others start
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusGone)
		w.Write([]byte(`{"error":{"code":"SOLD_OUT"}}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	const n = 8
	c, err := NewClient([]string{srv.URL}, "", n)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	c.Open(ctx, n)
	// The server counts a connection when it accepts it, a moment after the dial returns.
	for deadline := time.Now().Add(5 * time.Second); opened.Load() < n && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if got := opened.Load(); got != n {
		t.Fatalf("Open(%d) opened %d connections", n, got)
	}
	var wg sync.WaitGroup
	records := make([]Record, n)
	for i := range n {
		wg.Go(func() { records[i] = c.Grab(ctx, 0, "a", "u", "token") })
	}
	wg.Wait()
	for i, r := range records {
		if r.Outcome != SoldOut || r.Code != "SOLD_OUT" {
			t.Fatalf("grab %d: %+v, want sold out", i, r)
		}
	}
	if got := opened.Load(); got != n {
		t.Fatalf("%d requests at once over %d warm connections: %d connections opened in all, want %d", n, n, got, n)
	}
}

// TestClickerDropsDeadConnections: an idle connection the server closed, or one opened ahead of the
// crowd and left unused past freshFor, is closed rather than written on, and the click dials.
func TestClickerDropsDeadConnections(t *testing.T) {
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	ctx := context.Background()
	w := newClicker(5 * time.Second)
	defer w.close()

	stale, err := w.dial(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	w.put(srv.URL, stale)
	stale.idleAt = time.Now().Add(-2 * freshFor)
	if a, err := w.post(ctx, srv.URL, "/x", "t", ""); err != nil || a.status != http.StatusOK {
		t.Fatalf("a click after a stale connection: %d, %v", a.status, err)
	}
	if _, err := stale.conn.Write([]byte("x")); err == nil {
		t.Fatal("the stale connection is still open")
	}

	// The connection that answered is kept; the server then closes it while it is idle.
	srv.CloseClientConnections()
	for deadline := time.Now().Add(5 * time.Second); ; {
		w.mu.Lock()
		kept := w.idle[srv.URL]
		w.mu.Unlock()
		if len(kept) == 1 && !kept[0].alive() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle connections %d; the server's close not seen", len(kept))
		}
		time.Sleep(time.Millisecond)
	}
	if a, err := w.post(ctx, srv.URL, "/x", "t", ""); err != nil || a.status != http.StatusOK {
		t.Fatalf("a click after the server closed its connection: %d, %v", a.status, err)
	}
	if got := opened.Load(); got != 3 {
		t.Fatalf("%d connections opened, want 3: the stale one, its replacement, and one after the close", got)
	}
}

// TestBearersAreEachUsersOwn: the tokens minted ahead of the crowd name their own user, are good
// for the whole run, and a user past the crowd still gets one.
func TestBearersAreEachUsersOwn(t *testing.T) {
	const secret = "bench-test-secret-of-32-bytes-at-least"
	s := Sale{Crowd: Crowd{Users: 50, UserPrefix: "bench-u-"}, Secret: secret}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancel()
	bearer := s.bearers(ctx)
	tokens, err := auth.New([]byte(secret), func() time.Time { return time.Now().Add(2 * time.Hour) })
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1, 49, 50, 1000} {
		user, err := tokens.Verify(bearer(i))
		if err != nil || user != s.User(i) {
			t.Fatalf("user %d's token two hours on: %q, %v; want %q", i, user, err, s.User(i))
		}
	}
}

// TestKeyedClickGoesAgainOnAClosedConnection: a server that drops a kept connection as a click
// is sent on it (its idle timeout, a restart) gets the click again on a new connection when it
// carries an Idempotency-Key, as net/http's Transport sends such a request again; a click
// without a key reports the error.
func TestKeyedClickGoesAgainOnAClosedConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var keys []string
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for n := 0; ; n++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					if n == 1 {
						return // the second request on a connection: dropped unanswered
					}
					mu.Lock()
					keys = append(keys, req.Header.Get("Idempotency-Key"))
					mu.Unlock()
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
				}
			}()
		}
	}()
	base := "http://" + ln.Addr().String()
	ctx := context.Background()
	w := newClicker(5 * time.Second)
	defer w.close()
	for i, key := range []string{"k1", "k2"} {
		if a, err := w.post(ctx, base, "/x", "t", key); err != nil || a.status != http.StatusOK {
			t.Fatalf("click %d with a key: %d, %v", i+1, a.status, err)
		}
	}
	mu.Lock()
	if !slices.Equal(keys, []string{"k1", "k2"}) {
		t.Fatalf("the server heard keys %v, want k1 then k2 (sent again on a new connection)", keys)
	}
	mu.Unlock()
	if _, err := w.post(ctx, base, "/x", "t", ""); err == nil {
		t.Fatal("a click without a key on a dropped connection: no error")
	}
}

// TestAKeyedClickKeepsWhyItWasRefused: a click refused with a server error keeps the answer's
// message (which dependency, and why) in its record, for the nemesis's availability to say; a
// refusal of the buyer's own (409) keeps none.
func TestAKeyedClickKeepsWhyItWasRefused(t *testing.T) {
	status := http.StatusServiceUnavailable
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(status)
		if status == http.StatusServiceUnavailable {
			io.WriteString(w, `{"error":{"code":"BUSY","message":"busy: a dependency is unavailable: redis: circuit breaker is open"}}`)
			return
		}
		io.WriteString(w, `{"error":{"code":"ALREADY_BOUGHT","message":"already bought: the limit is 1"}}`)
	}))
	defer srv.Close()
	c, err := NewClient([]string{srv.URL}, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := c.GrabKeyed(context.Background(), 0, "a1", "u1", "t", "k1")
	if r.Code != wire.CodeBusy || r.RetryAfter != 1 || r.Detail != "busy: a dependency is unavailable: redis: circuit breaker is open" {
		t.Fatalf("a BUSY click's record: %+v", r)
	}
	status = http.StatusConflict
	if r := c.GrabKeyed(context.Background(), 0, "a1", "u1", "t", "k2"); r.Status != http.StatusConflict || r.Detail != "" {
		t.Fatalf("a 409 click's record: %+v", r)
	}
}
