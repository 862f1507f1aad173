package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill/internal/breaker"
	"seckill/internal/httpapi"
	"seckill/internal/httpapi/wire"
	"seckill/internal/metrics"
	"seckill/internal/risk"
	"seckill/internal/saletest"
)

// signalsOf is a grab body with a person's signals from the device fingerprint fp.
func signalsOf(fp string, moves int) string {
	b, _ := json.Marshal(wire.GrabBody{Signals: &wire.Signals{Moves: moves, PathPx: 2300, DirectionEntropy: 2.4,
		SpeedCV: 0.8, LoadToClickMs: 7000, Fingerprint: fp}})
	return string(b)
}

const printA = "00112233445566778899aabbccddeeff"

// writeModel writes a model that challenges a grab without the page's signals and blocks the
// fifth account on one device fingerprint.
func writeModel(t *testing.T, path, version string) {
	t.Helper()
	// Log-odds 1.5 without signals (0.82: a challenge); with them -10.87 + 8·log(1 + the
	// device's accounts): 0.56 for the third account, 0.88 for the fourth, 0.97 for the fifth.
	m := risk.Model{Format: risk.ModelFormat, Version: version, ChallengeAt: 0.6, BlockAt: 0.9, Bias: 1.5, Features: []risk.Feature{
		{Name: "page_signals", Mean: 0, Scale: 1, Weight: -12.37},
		{Name: "fp_users", Mean: 0, Scale: 1, Weight: 8},
	}}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// modelFixture serves the API with a risk engine running the model at path (shadow: counted
// only) beside the rule of 20 accounts per address, and health.
func modelFixture(t *testing.T, path string, shadow bool, monitor *breaker.Monitor) (*fixture, *risk.Engine) {
	t.Helper()
	e, err := risk.Open(risk.Options{Rules: []risk.Rule{&risk.AccountsPerIP{ChallengeAbove: 20, BlockAt: 100, Window: time.Minute}},
		Features: risk.NewFeatures(time.Minute, nil), ModelPath: path, Shadow: shadow})
	if err != nil {
		t.Fatal(err)
	}
	return newFixtureWith(t, func(c *httpapi.Config, _ *saletest.Clock) { c.Risk, c.Health = e, monitor }), e
}

// TestGrabsJudgedByTheModel: the page's signals reach the model, which decides: a grab without
// them is challenged (and goes through a solved challenge), the fifth account on one device is
// blocked, and the client is not told which features weighed. Signals a page cannot measure are
// refused like any bad body, and change nothing. /readyz names the model, and a model file that
// stops loading leaves the model before it judging, and says so.
func TestGrabsJudgedByTheModel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.json")
	writeModel(t, path, "m1")
	f, e := modelFixture(t, path, false, nil)
	id := f.create(bigItem)
	grab := "/api/activities/" + id + "/grab"
	if r := f.do("POST", grab, f.user("ann"), signalsOf(printA, 140)); r.status != http.StatusAccepted {
		t.Fatalf("a person's grab with signals: %d %s", r.status, r.raw)
	}
	bob := f.user("bob")
	r := f.do("POST", grab, bob, "")
	if r.status != http.StatusForbidden || r.code() != "CHALLENGE_REQUIRED" || !strings.Contains(r.raw, "the risk model asks") ||
		strings.Contains(r.raw, "page_signals") {
		t.Fatalf("a grab without signals: %d %s, want 403 CHALLENGE_REQUIRED saying nothing of the features", r.status, r.raw)
	}
	pass := f.solveSlowly(id, bob)
	if r := f.do("POST", pass.body["grab_path"].(string), bob, ""); r.status != http.StatusAccepted {
		t.Fatalf("bob through a solved challenge: %d %s", r.status, r.raw)
	}
	// More accounts on ann's device: the second and third pass, the fourth is challenged, the fifth blocked.
	for i, want := range []string{"", "", "CHALLENGE_REQUIRED", "BLOCKED"} {
		r := f.do("POST", grab, f.user("c"+string(rune('1'+i))), signalsOf(printA, 150+i))
		if got := r.code(); got != want || (want == "") != (r.status == http.StatusAccepted) {
			t.Errorf("account %d on one device: %d %s, want %q", i+2, r.status, r.raw, want)
		}
	}
	f.drain(id)
	before := f.holdings(id)
	for name, body := range map[string]string{
		"negative moves":        strings.Replace(signalsOf(printA, 1), `"moves":1`, `"moves":-1`, 1),
		"entropy of 9 bits":     strings.Replace(signalsOf(printA, 1), `"direction_entropy":2.4`, `"direction_entropy":9`, 1),
		"an uppercase print":    signalsOf(strings.ToUpper(printA), 5),
		"an unknown signal":     `{"signals":{"moves":1,"path_px":1,"direction_entropy":0,"speed_cv":0,"touch":false,"load_to_click_ms":1,"mouse_colour":"red"}}`,
		"signals not an object": `{"signals":[1,2]}`,
		"a day and more":        strings.Replace(signalsOf(printA, 1), `"load_to_click_ms":7000`, `"load_to_click_ms":86400001`, 1),
	} {
		if r := f.do("POST", grab, f.user("dora"), body); r.status != http.StatusBadRequest || r.code() != "INVALID_ARGUMENT" {
			t.Errorf("%s: %d %s, want 400 INVALID_ARGUMENT", name, r.status, r.raw)
		}
	}
	if after := f.holdings(id); after != before {
		t.Fatalf("refused signals wrote: %s -> %s", before, after)
	}
	ready := func() map[string]any {
		r := f.do("GET", "/readyz", "", "")
		m, _ := r.body["risk_model"].(map[string]any)
		return m
	}
	if m := ready(); m["version"] != "m1" || m["features"] != 2.0 || m["error"] != nil {
		t.Fatalf("readyz risk_model %v", m)
	}
	if err := os.WriteFile(path, []byte(`{"format":"seckill.risk.model/v1"`), 0o644); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(time.Minute) // a new time, whatever the file system's resolution
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Reload(); err == nil {
		t.Fatal("a broken model file reloaded")
	}
	if m := ready(); m["version"] != "m1" || m["error"] == nil {
		t.Fatalf("readyz after a broken file: %v, want m1 still with the error", m)
	}
	if r := f.do("POST", grab, f.user("eve"), ""); r.code() != "CHALLENGE_REQUIRED" {
		t.Fatalf("after a broken file, a grab without signals: %d %s, want m1 still challenging", r.status, r.raw)
	}
}

// TestTheModelStandsAside: in shadow mode the rules decide; on a degraded node the engine is
// skipped, model and rules.
func TestTheModelStandsAside(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.json")
	writeModel(t, path, "m1")
	t.Run("shadow", func(t *testing.T) {
		f, _ := modelFixture(t, path, true, nil)
		id := f.create(bigItem)
		if r := f.do("POST", "/api/activities/"+id+"/grab", f.user("bob"), ""); r.status != http.StatusAccepted {
			t.Fatalf("a grab without signals in shadow mode: %d %s, want the rules' allow", r.status, r.raw)
		}
	})
	t.Run("degraded", func(t *testing.T) {
		g := breaker.NewGuard(breaker.Database, breaker.Thresholds{}, time.Now)
		for range 10 {
			g.Do(context.Background(), func(context.Context) error { return errors.New("down") })
		}
		monitor := breaker.NewMonitor(g)
		if monitor.Level() != breaker.Degraded {
			t.Fatalf("the monitor is %v, want degraded", monitor.Level())
		}
		f, _ := modelFixture(t, path, false, monitor)
		id := f.create(bigItem)
		if r := f.do("POST", "/api/activities/"+id+"/grab", f.user("bob"), ""); r.status != http.StatusAccepted {
			t.Fatalf("a grab without signals on a degraded node: %d %s, want the engine skipped", r.status, r.raw)
		}
	})
}

// downWindows are risk windows shared by the nodes whose store is down.
type downWindows struct{}

func (downWindows) Count(context.Context, risk.Keys, time.Time) (risk.Seen, error) {
	return risk.Seen{}, errors.New("risk windows: connection refused")
}

func (downWindows) Solved(context.Context, string, time.Duration, time.Time) error {
	return errors.New("risk windows: connection refused")
}

// TestRiskWindowsDownIsBusy: when the windows the nodes share cannot count a grab, the grab is
// 503 BUSY and takes nothing, as when a rate limit cannot be checked (fail closed); a right
// answer whose solve cannot be recorded for the model is BUSY too.
func TestRiskWindowsDownIsBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.json")
	writeModel(t, path, "m1")
	e, err := risk.Open(risk.Options{Rules: []risk.Rule{&risk.AccountsPerIP{ChallengeAbove: 20, BlockAt: 100, Window: time.Minute}},
		Features: risk.NewFeatures(time.Minute, nil), ModelPath: path, Windows: downWindows{}})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureWith(t, func(c *httpapi.Config, _ *saletest.Clock) { c.Risk = e })
	id := f.create(bigItem)
	before := f.holdings(id)
	ann := f.user("ann")
	if r := f.do("POST", "/api/activities/"+id+"/grab", ann, signalsOf(printA, 140)); r.status != http.StatusServiceUnavailable || r.code() != "BUSY" {
		t.Fatalf("a grab the risk windows cannot count: %d %s, want 503 BUSY", r.status, r.raw)
	}
	if r := f.solveSlowly(id, ann); r.status != http.StatusServiceUnavailable || r.code() != "BUSY" {
		t.Fatalf("an answer whose solve cannot be recorded: %d %s, want 503 BUSY", r.status, r.raw)
	}
	f.drain(id)
	if after := f.holdings(id); after != before {
		t.Fatalf("a grab refused BUSY wrote: %s -> %s", before, after)
	}
}

// syncBuffer is a log's output, written by the handlers and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) lines(substr string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range strings.Split(b.b.String(), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// TestModelLogIsSampled: a flood of grabs the model challenges, and of grabs it blocks, within
// one second, writes one log line of each, and the next second's first line of each says how
// many were left out; the metrics count every one.
func TestModelLogIsSampled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.json")
	writeModel(t, path, "m1")
	e, err := risk.Open(risk.Options{Features: risk.NewFeatures(time.Minute, nil), ModelPath: path})
	if err != nil {
		t.Fatal(err)
	}
	stats := metrics.New()
	e.Observe = stats.Risk
	var logged syncBuffer
	var clock *saletest.Clock
	f := newFixtureWith(t, func(c *httpapi.Config, cl *saletest.Clock) {
		c.Risk, c.Log, clock = e, slog.New(slog.NewTextHandler(&logged, nil)), cl
	})
	id := f.create(bigItem)
	grab := "/api/activities/" + id + "/grab"
	const flood = 300
	for i := range flood { // no signals: challenged
		if r := f.do("POST", grab, f.user(fmt.Sprint("script-", i)), ""); r.code() != "CHALLENGE_REQUIRED" {
			t.Fatalf("grab %d without signals: %d %s", i, r.status, r.raw)
		}
	}
	for i := range flood { // one device: the fourth account is challenged, the fifth on blocked
		if r := f.do("POST", grab, f.user(fmt.Sprint("farm-", i)), signalsOf(printA, 100+i)); i >= 4 && r.code() != "BLOCKED" {
			t.Fatalf("account %d on one device: %d %s", i+1, r.status, r.raw)
		}
	}
	challenges, blocks := logged.lines("decision=challenge"), logged.lines("decision=block")
	if len(challenges) != 1 || len(blocks) != 1 || !strings.Contains(challenges[0], "suppressed=0") {
		t.Fatalf("a second's flood logged %d challenges and %d blocks, want one of each:\n%s", len(challenges), len(blocks),
			strings.Join(append(challenges, blocks...), "\n"))
	}
	clock.Advance(time.Second)
	f.do("POST", grab, f.user("script-late"), "")
	f.do("POST", grab, f.user("farm-late"), signalsOf(printA, 99))
	challenges, blocks = logged.lines("decision=challenge"), logged.lines("decision=block")
	// The challenges left out: the flood's but its first, and the farm's fourth account.
	if len(challenges) != 2 || !strings.Contains(challenges[1], fmt.Sprintf("suppressed=%d", flood)) {
		t.Errorf("the next second's challenge: %q, want it to count the %d left out", challenges, flood)
	}
	if len(blocks) != 2 || !strings.Contains(blocks[1], fmt.Sprintf("suppressed=%d", flood-4-1)) {
		t.Errorf("the next second's block: %q, want it to count the %d left out", blocks, flood-4-1)
	}
	rec := httptest.NewRecorder()
	stats.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range []string{
		fmt.Sprintf(`seckill_risk_model_decisions_total{decision="challenge",mode="enforce"} %d`, flood+2),
		fmt.Sprintf(`seckill_risk_model_decisions_total{decision="block",mode="enforce"} %d`, flood-4+1),
	} {
		if !strings.Contains(rec.Body.String(), line+"\n") {
			t.Errorf("/metrics lacks %q", line)
		}
	}
}
