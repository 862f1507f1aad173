// Package e2etest drives seckill nodes from the outside, as a crowd and an operator do: the
// HTTP client of the end-to-end suites (every exchange held to the OpenAPI document), the
// environment of a test node, and nodes of the built binary started, killed and restarted.
// cmd/seckill's suites and the fault suites beside it (cmd/seckill/faults) share it.
package e2etest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill/internal/auth"
	"seckill/internal/openapitest"
	"seckill/internal/testtier"
)

// The secrets of every test node (see Env).
const (
	Secret = "e2e-secret-0123456789abcdef-0123456789"
	Admin  = "e2e-admin-token"
)

// Env is the environment of a test node on the database dsn, with more variables as name,
// value pairs.
func Env(dsn string, more ...string) map[string]string {
	env := map[string]string{
		"SECKILL_ADDR":         "127.0.0.1:0",
		"SECKILL_METRICS_ADDR": "127.0.0.1:0",
		"SECKILL_DB":           dsn,
		"SECKILL_JWT_SECRET":   Secret,
		"SECKILL_ADMIN_TOKEN":  Admin,
		"SECKILL_LOG_LEVEL":    "warn",
	}
	for i := 0; i+1 < len(more); i += 2 {
		env[more[i]] = more[i+1]
	}
	return env
}

// SQLiteDSN is a fresh SQLite database in t's temp dir.
func SQLiteDSN(t testing.TB) string { return "sqlite:" + filepath.Join(t.TempDir(), "db") }

// Client drives a running node's HTTP API the way a crowd would.
type Client struct {
	t      testing.TB
	Base   string
	http   *http.Client
	tokens *auth.Tokens
	mu     sync.Mutex
	minted map[string]string
}

// NewClient returns a client of the node at base, its users' tokens minted with Secret.
func NewClient(t testing.TB, base string) *Client {
	tk, err := auth.New([]byte(Secret), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	// Every exchange with the API is held to the OpenAPI document, as in httpapi's suite.
	return &Client{t: t, Base: base, tokens: tk, minted: map[string]string{},
		http: &http.Client{Transport: openapitest.Transport(t, tr, openapitest.APIPath), Timeout: 30 * time.Second}}
}

// Token is user's bearer token, minted once.
func (c *Client) Token(user string) string {
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

// Call sends a request and decodes the JSON answer; err is set when no answer came.
func (c *Client) Call(method, path, bearer, body string) (int, map[string]any, error) {
	return c.CallKeyed(method, path, bearer, "", body)
}

// CallKeyed is Call with an Idempotency-Key (none if key is empty).
func (c *Client) CallKeyed(method, path, bearer, key, body string) (int, map[string]any, error) {
	req, err := http.NewRequest(method, c.Base+path, strings.NewReader(body))
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

// Must is Call that fails the test unless the answer is want.
func (c *Client) Must(method, path, bearer, body string, want int) map[string]any {
	c.t.Helper()
	status, m, err := c.Call(method, path, bearer, body)
	if err != nil || status != want {
		c.t.Fatalf("%s %s: %d %v %v, want %d", method, path, status, m, err, want)
	}
	return m
}

// CreateItem creates an item of stock units, limit a user, on sale from now for an hour.
func (c *Client) CreateItem(stock, limit int, payWindow time.Duration) string {
	c.t.Helper()
	now := time.Now().UTC()
	body := fmt.Sprintf(`{"name":"e2e","kind":"item","stock":%d,"per_user_limit":%d,"price_cents":100,"start_at":%q,"end_at":%q,"pay_window_s":%d}`,
		stock, limit, now.Add(-time.Second).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339), int(payWindow/time.Second))
	return c.Must("POST", "/api/admin/activities", Admin, body, http.StatusCreated)["id"].(string)
}

// Stats reads an activity's counters.
func (c *Client) Stats(id string) map[string]any {
	c.t.Helper()
	return c.Must("GET", "/api/admin/activities/"+id+"/stats", Admin, "", http.StatusOK)
}

// Drained waits until every acknowledged grab of id has been placed as an order.
func (c *Client) Drained(id string) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		st := c.Stats(id)
		if st["pending_queue"] == 0.0 {
			return st
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("queue not drained after 60s: %v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Outcome is one click's answer.
type Outcome struct {
	User   string
	Status int
	Code   string
	Token  string
	Err    error
}

// Crowd has users click grab (1+dup clicks each) on activity id with conc clients, and returns
// every outcome. observe, if set, sees each outcome as it arrives; stop, if set, ends the crowd
// early when it returns true.
func (c *Client) Crowd(id string, users []string, dup, conc int, observe func(Outcome), stop func() bool) []Outcome {
	clicks := make(chan string)
	var mu sync.Mutex
	var out []Outcome
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for user := range clicks {
				status, m, err := c.Call("POST", "/api/activities/"+id+"/grab", c.Token(user), "")
				o := Outcome{User: user, Status: status, Err: err}
				if m != nil {
					o.Token, _ = m["order_token"].(string)
					if e, ok := m["error"].(map[string]any); ok {
						o.Code, _ = e["code"].(string)
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
			clicks <- u
		}
	}
	close(clicks)
	wg.Wait()
	return out
}

// WaitListening reads "seckill listening on URL" from r (a node's stdout), and hands the
// metrics address it prints before, if metrics is not nil.
func WaitListening(t testing.TB, r io.Reader, metrics *string) string {
	t.Helper()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "metrics: "); ok && metrics != nil {
				*metrics = u // printed before the API's address, read after it
			}
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

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds the seckill binary, once per test process, and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	testtier.NeedsServer(t, "the built seckill binary")
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "seckill-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "seckill")
		_, here, _, _ := runtime.Caller(0) // internal/e2etest/e2etest.go
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/seckill")
		cmd.Dir = filepath.Join(filepath.Dir(here), "..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// Child is a node of the built binary.
type Child struct {
	cmd     *exec.Cmd
	Base    string
	Metrics string // the URL of its metrics
}

// StartChild starts the built binary's serve with env, and nothing else, as its environment
// (see Env); it is killed when t ends.
func StartChild(t testing.TB, env map[string]string) *Child {
	t.Helper()
	cmd := exec.Command(Binary(t), "serve")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &Child{cmd: cmd}
	t.Cleanup(c.Kill)
	c.Base = WaitListening(t, stdout, &c.Metrics)
	return c
}

// Kill sends the node SIGKILL (no shutdown, no flush) and waits for it.
func (c *Child) Kill() {
	if c.cmd.ProcessState == nil {
		c.cmd.Process.Kill()
		c.cmd.Wait()
	}
}

// HTTP is the client's own HTTP client, its exchanges held to the OpenAPI document: for what
// is not JSON (an export, a page).
func (c *Client) HTTP() *http.Client { return c.http }

// Signal sends sig to the node (SIGSTOP freezes it, SIGCONT thaws it).
func (c *Child) Signal(sig os.Signal) error { return c.cmd.Process.Signal(sig) }

// T is the test the client fails.
func (c *Client) T() testing.TB { return c.t }
