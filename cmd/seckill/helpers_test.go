package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill/internal/dbtest"
	"seckill/internal/e2etest"

	"seckill/internal/testtier"
)

// The end-to-end suites drive nodes through internal/e2etest's client; these are its names here.
const (
	testSecret = e2etest.Secret
	testAdmin  = e2etest.Admin
)

type (
	client  = e2etest.Client
	outcome = e2etest.Outcome
)

func newClient(t testing.TB, base string) *client          { return e2etest.NewClient(t, base) }
func testEnv(dsn string, more ...string) map[string]string { return e2etest.Env(dsn, more...) }
func sqliteDSN(t *testing.T) string                        { return e2etest.SQLiteDSN(t) }

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
