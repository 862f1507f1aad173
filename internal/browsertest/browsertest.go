// Package browsertest runs Debian's Chromium, headless, for the tests of the pages: a browser per
// test, the page's uncaught exceptions turned into test failures, and screenshots kept as test
// artifacts (go test -artifacts keeps them; make test does).
package browsertest

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"seckill/internal/testtier"
)

// Chromium is where Debian's chromium package puts the browser.
const Chromium = "/usr/bin/chromium"

// Timeout bounds every test's browser session.
const Timeout = 2 * time.Minute

// Browser is one headless Chromium with one tab.
type Browser struct {
	Ctx context.Context // chromedp's context of the tab

	t      *testing.T
	mu     sync.Mutex
	errors []string // the page's uncaught exceptions and errors (but failed requests)
}

// New starts a headless Chromium for t with a window of width × height CSS pixels; it stops
// when t's cleanup runs, and t fails if a page threw an uncaught exception or logged an error
// (a script's console.error, a Content-Security-Policy violation).
// A missing Chromium fails the test: make test installs it.
func New(t *testing.T, width, height int) *Browser {
	t.Helper()
	testtier.NeedsServer(t, "Chromium")
	if _, err := os.Stat(Chromium); err != nil {
		t.Fatalf("the browser tests need Chromium at %s (make test installs it; or apt-get install chromium): %v", Chromium, err)
	}
	dir := t.TempDir()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(Chromium),
		chromedp.NoSandbox,
		chromedp.Flag("disable-background-networking", true),
		chromedp.UserDataDir(dir),
		// Chromium keeps its singleton socket in a directory of its own under TMPDIR, which a
		// browser stopped by its context leaves behind (/tmp/org.chromium.Chromium.*, a score
		// a make test): under the test's directory, it goes with it.
		chromedp.Env("TMPDIR="+dir),
		chromedp.WindowSize(width, height),
	)
	deadline, cancelDeadline := context.WithTimeout(context.Background(), Timeout)
	alloc, cancelAlloc := chromedp.NewExecAllocator(deadline, opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	b := &Browser{Ctx: ctx, t: t}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(int64(width), int64(height))); err != nil {
		cancel()
		cancelAlloc()
		cancelDeadline()
		t.Fatalf("start %s: %v", Chromium, err)
	}
	watching := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		msgs := chromedp.Console(ctx)
		close(watching)
		for m, err := range msgs {
			if err != nil {
				return
			}
			// Answers with an error status are the browser log's "network" errors: the pages
			// expect them (a 410 is how a sale says sold out). Everything else counts.
			if m.IsException() || m.Type == chromedp.ConsoleError && m.Source != "network" {
				b.mu.Lock()
				b.errors = append(b.errors, m.String())
				b.mu.Unlock()
			}
		}
	}()
	<-watching
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		cancelDeadline()
		<-done
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, e := range b.errors {
			t.Errorf("the page logged: %s", e)
		}
	})
	return b
}

// Do runs chromedp steps in the tab, failing the test on an error.
func (b *Browser) Do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.Ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

// Text returns the text of the element with id.
func (b *Browser) Text(id string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.Ctx, chromedp.Text(chromedp.ID(id), chromedp.NodeReady))
	if err != nil {
		b.t.Fatalf("text of #%s: %v", id, err)
	}
	return s
}

// Eval evaluates a JavaScript expression and returns its value.
func Eval[T any](b *Browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.Ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// WaitFor waits until the JavaScript expression is truthy, failing the test with what after
// timeout.
func (b *Browser) WaitFor(expr string, timeout time.Duration, what string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.Ctx, chromedp.Poll[chromedp.Void](expr,
		chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		b.t.Fatalf("waiting %v for %s (%s): %v", timeout, what, expr, err)
	}
}

// Screenshot saves the whole page as name.png among t's artifacts and returns the file's path.
func (b *Browser) Screenshot(name string) string {
	b.t.Helper()
	png, err := chromedp.Run(b.Ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(b.t.ArtifactDir(), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", path)
	return path
}
