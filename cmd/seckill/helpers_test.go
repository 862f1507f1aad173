package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill/internal/auth"
	"seckill/internal/contract"
	"seckill/internal/dbtest"

	"seckill/internal/testtier"
)

const (
	testSecret = "e2e-secret-0123456789abcdef-0123456789"
	testAdmin  = "e2e-admin-token"
)

// client drives a running server's HTTP API the way a crowd would.
type client struct {
	t      testing.TB
	base   string
	http   *http.Client
	tokens *auth.Tokens
	mu     sync.Mutex
	minted map[string]string
}

func newClient(t testing.TB, base string) *client {
	tk, err := auth.New([]byte(testSecret), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	// Every exchange with the API is held to the OpenAPI document, as in httpapi's suite.
	return &client{t: t, base: base, tokens: tk, minted: map[string]string{},
		http: &http.Client{Transport: contract.Transport(t, tr, contract.APIPath), Timeout: 30 * time.Second}}
}

func (c *client) token(user string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if tok, ok := c.minted[user]; ok {
		return tok
	}
	tok, err := c.tokens.Mint(user, time.Now(), time.Hour)
	if err != nil {
		c.t.Fatal(err)
	}
	c.minted[user] = tok
	return tok
}

// call sends a request and decodes the JSON answer; err is set when no answer came.
func (c *client) call(method, path, bearer, body string) (int, map[string]any, error) {
	return c.callKeyed(method, path, bearer, "", body)
}

// callKeyed is call with an Idempotency-Key (none if key is empty).
func (c *client) callKeyed(method, path, bearer, key, body string) (int, map[string]any, error) {
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	if len(raw) == 0 && resp.StatusCode == http.StatusNoContent {
		return resp.StatusCode, nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%s %s: %d, body not JSON: %q", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, m, nil
}

func (c *client) must(method, path, bearer, body string, want int) map[string]any {
	c.t.Helper()
	status, m, err := c.call(method, path, bearer, body)
	if err != nil || status != want {
		c.t.Fatalf("%s %s: %d %v %v, want %d", method, path, status, m, err, want)
	}
	return m
}

func (c *client) createItem(stock, limit int, payWindow time.Duration) string {
	c.t.Helper()
	now := time.Now().UTC()
	body := fmt.Sprintf(`{"name":"e2e","kind":"item","stock":%d,"per_user_limit":%d,"price_cents":100,"start_at":%q,"end_at":%q,"pay_window_s":%d}`,
		stock, limit, now.Add(-time.Second).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339), int(payWindow/time.Second))
	return c.must("POST", "/api/admin/activities", testAdmin, body, http.StatusCreated)["id"].(string)
}

func (c *client) stats(id string) map[string]any {
	c.t.Helper()
	return c.must("GET", "/api/admin/activities/"+id+"/stats", testAdmin, "", http.StatusOK)
}

// drained waits until every acknowledged grab of id has been placed as an order.
func (c *client) drained(id string) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		st := c.stats(id)
		if st["pending_queue"] == 0.0 {
			return st
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("queue not drained after 60s: %v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// outcome is one click's answer.
type outcome struct {
	user   string
	status int
	code   string
	token  string
	err    error
}

// crowd has users click grab (1+dup clicks each) on activity id with conc clients, and returns
// every outcome. observe, if set, sees each outcome as it arrives; stop, if set, ends the crowd
// early when it returns true.
func (c *client) crowd(id string, users []string, dup, conc int, observe func(outcome), stop func() bool) []outcome {
	type click struct{ user string }
	clicks := make(chan click)
	var mu sync.Mutex
	var out []outcome
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for k := range clicks {
				status, m, err := c.call("POST", "/api/activities/"+id+"/grab", c.token(k.user), "")
				o := outcome{user: k.user, status: status, err: err}
				if m != nil {
					o.token, _ = m["order_token"].(string)
					if e, ok := m["error"].(map[string]any); ok {
						o.code, _ = e["code"].(string)
					}
				}
				if observe != nil {
					observe(o)
				}
				mu.Lock()
				out = append(out, o)
				mu.Unlock()
			}
		})
	}
	for round := 0; round <= dup; round++ {
		for _, u := range users {
			if stop != nil && stop() {
				break
			}
			clicks <- click{u}
		}
	}
	close(clicks)
	wg.Wait()
	return out
}

// lineWriter passes lines to a callback; run prints its address this way.
type lineWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	line func(string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		i := bytes.IndexByte(w.buf.Bytes(), '\n')
		if i < 0 {
			return len(p), nil
		}
		w.line(string(w.buf.Next(i + 1)))
	}
}

// waitListening reads "seckill listening on URL" from r (a child's stdout).
func waitListening(t testing.TB, r io.Reader) string {
	t.Helper()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "seckill listening on "); ok {
				found <- u
			}
		}
	}()
	select {
	case u := <-found:
		return u
	case <-time.After(60 * time.Second):
		t.Fatal("the server did not print its address within 60s")
		return ""
	}
}

// testEnv is the environment of a test server on the database dsn, with more variables as
// name, value pairs.
func testEnv(dsn string, more ...string) map[string]string {
	env := map[string]string{
		"SECKILL_ADDR":         "127.0.0.1:0",
		"SECKILL_METRICS_ADDR": "127.0.0.1:0",
		"SECKILL_DB":           dsn,
		"SECKILL_JWT_SECRET":   testSecret,
		"SECKILL_ADMIN_TOKEN":  testAdmin,
		"SECKILL_LOG_LEVEL":    "warn",
	}
	for i := 0; i+1 < len(more); i += 2 {
		env[more[i]] = more[i+1]
	}
	return env
}

// launch runs run() in process until ctx ends and returns its base URL and its result.
func launch(t *testing.T, ctx context.Context, env map[string]string, args ...string) (string, <-chan error) {
	t.Helper()
	return launchLogging(t, ctx, env, io.Discard, args...)
}

// launchLogging is launch with run's log written to stderr.
func launchLogging(t *testing.T, ctx context.Context, env map[string]string, stderr io.Writer, args ...string) (string, <-chan error) {
	t.Helper()
	testtier.NeedsServer(t, "a seckill node")
	addr := make(chan string, 1)
	var scrapeAt string
	stdout := &lineWriter{line: func(l string) {
		if u, ok := strings.CutPrefix(strings.TrimSpace(l), "metrics: "); ok {
			scrapeAt = u // printed before the API's address
		}
		if u, ok := strings.CutPrefix(strings.TrimSpace(l), "seckill listening on "); ok {
			metricsOf.Store(u, scrapeAt)
			addr <- u
		}
	}}
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, env, stdout, stderr) }()
	select {
	case u := <-addr:
		return u, done
	case err := <-done:
		t.Fatalf("run ended before listening: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not listen within 30s")
	}
	return "", nil
}

// metricsOf holds the metrics URL of each node launch started, by its base URL.
var metricsOf sync.Map

// scrape is the metrics text of the node launched at base, read from its own listener.
func scrape(t *testing.T, base string) string {
	t.Helper()
	at, _ := metricsOf.Load(base)
	u, _ := at.(string)
	if u == "" {
		t.Fatalf("the node at %s printed no metrics address", base)
	}
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", u, resp.StatusCode, err)
	}
	return string(b)
}

// sqliteDSN is a fresh SQLite database in t's temp dir.
func sqliteDSN(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "db") }

// startRun launches run() on a free port; the server is shut down, and run's error checked, when
// the test ends.
func startRun(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	base, done := launch(t, ctx, env, args...)
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	return base
}

func TestMain(m *testing.M) {
	code := m.Run()
	dbtest.StopAll()
	os.Exit(code)
}
