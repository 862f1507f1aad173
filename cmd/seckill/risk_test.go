package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"seckill/internal/risk"
)

// writeLabelled writes n requests drawn from a known pattern (bots click at a steady cadence
// and move the pointer little) to a JSON-lines file; seed and shift make another draw.
func writeLabelled(t *testing.T, path string, seed uint64, n int, shift float64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 3))
	var b bytes.Buffer
	for range n {
		bot := r.Float64() < 0.3
		cadence, entropy := 0.6+0.2*r.NormFloat64(), 2.5+0.5*r.NormFloat64()
		if bot {
			cadence, entropy = 0.1+shift+0.1*r.NormFloat64(), 0.8+shift+0.6*r.NormFloat64()
		}
		fmt.Fprintf(&b, `{"features":{"cadence_cv":%g,"pointer_entropy":%g},"bot":%t}`+"\n", cadence, entropy, bot)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRiskTrainAndEval: a model fitted on one draw is measured on another, drawn with other
// seeds and parameters; the file it writes is one serve can read.
func TestRiskTrainAndEval(t *testing.T) {
	dir := t.TempDir()
	train, held, model := filepath.Join(dir, "train.jsonl"), filepath.Join(dir, "held.jsonl"), filepath.Join(dir, "model.json")
	writeLabelled(t, train, 1, 4000, 0)
	writeLabelled(t, held, 2, 2000, 0.1)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"risk", "train", "--in", train, "--out", model, "--version", "t1"}, noEnv, &out, io.Discard); err != nil {
		t.Fatalf("train: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "model t1: 2 features, fitted on 4000 requests") {
		t.Errorf("train said %q", out.String())
	}
	b, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := risk.ParseModel(b); err != nil {
		t.Fatalf("the model file: %v", err)
	}
	out.Reset()
	if err := run(context.Background(), []string{"risk", "eval", "--model", model, "--in", held, "--json"}, noEnv, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var e risk.Evaluation
	if err := json.Unmarshal(out.Bytes(), &e); err != nil {
		t.Fatal(err)
	}
	if e.Samples != 2000 || e.AUC < 0.95 || math.IsNaN(e.Recall) {
		t.Fatalf("held-out evaluation %+v; want the 2,000 requests and an AUC above 0.95", e)
	}
	t.Logf("held out: precision %.3f recall %.3f humans challenged %.3f AUC %.3f", e.Precision, e.Recall, e.HumansChallenged, e.AUC)
	for _, bad := range [][]string{{"risk"}, {"risk", "guess"}, {"risk", "train", "--in", train}, {"risk", "eval", "--model", train, "--in", held},
		{"risk", "train", "--in", filepath.Join(dir, "nope"), "--out", model, "--version", "v"}} {
		if err := run(context.Background(), bad, noEnv, io.Discard, io.Discard); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}
