package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"seckill/internal/dbtest"
	"seckill/internal/redistest"
	"seckill/internal/risk"
)

// writeDrawn writes n requests drawn from a known pattern (bots click at a steady cadence
// and move the pointer little) to a JSON-lines file; seed and shift make another draw.
func writeDrawn(t *testing.T, path string, seed uint64, n int, shift float64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 3))
	var b bytes.Buffer
	for range n {
		bot := r.Float64() < 0.3
		cadence, entropy := 0.4+0.2*r.NormFloat64(), 2.5+0.5*r.NormFloat64()
		if bot {
			cadence, entropy = 0.9-shift+0.1*r.NormFloat64(), 0.8+shift+0.6*r.NormFloat64()
		}
		fmt.Fprintf(&b, `{"features":{"cadence":%g,"direction_entropy":%g},"bot":%t}`+"\n", cadence, entropy, bot)
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
	writeDrawn(t, train, 1, 4000, 0)
	writeDrawn(t, held, 2, 2000, 0.1)
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

// TestRiskLabel: a node's recording becomes a labelled file from the list of the bots'
// accounts, which risk train reads; an unlabelled recording is not one it trains on, and a
// feature the node does not compute is refused.
func TestRiskLabel(t *testing.T) {
	dir := t.TempDir()
	rec, bots, labelled := filepath.Join(dir, "rec.jsonl"), filepath.Join(dir, "bots.txt"), filepath.Join(dir, "labelled.jsonl")
	var b bytes.Buffer
	for i := range 60 {
		user, moves := fmt.Sprint("person", i), 40+i
		if i%3 == 0 {
			user, moves = fmt.Sprint("script", i), 0
		}
		fmt.Fprintf(&b, `{"at":"2001-11-30T11:00:00Z","activity":"a1","user":%q,"features":{"pointer_moves":%d,"ip_users":%d},"decision":"allow"}`+"\n",
			user, moves, 1+i%4)
	}
	if err := os.WriteFile(rec, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var list strings.Builder
	list.WriteString("# the scripted accounts\n")
	for i := 0; i < 60; i += 3 {
		fmt.Fprintf(&list, "script%d\n", i)
	}
	if err := os.WriteFile(bots, []byte(list.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "m.json")
	if err := run(context.Background(), []string{"risk", "train", "--in", rec, "--out", model, "--version", "v"}, noEnv, io.Discard, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "no label") {
		t.Fatalf("training on an unlabelled recording: %v", err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"risk", "label", "--in", rec, "--bots", bots, "--out", labelled}, noEnv, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "labelled 60 requests: 20 of a bot (20 accounts listed), 40 of a person") {
		t.Errorf("label said %q", out.String())
	}
	f, err := os.Open(labelled)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, rows, isBot, err := risk.ReadLabelled(f, []string{"pointer_moves"})
	if err != nil || len(rows) != 60 || !isBot[0] || isBot[1] || rows[0][0] != 0 {
		t.Fatalf("the labelled file: %v %v %v", rows, isBot, err)
	}
	if err := run(context.Background(), []string{"risk", "train", "--in", labelled, "--out", model, "--version", "v"}, noEnv, io.Discard, io.Discard); err != nil {
		t.Fatalf("training on the labelled file: %v", err)
	}
	alien := filepath.Join(dir, "alien.jsonl")
	if err := os.WriteFile(alien, []byte(`{"features":{"mouse_colour":1},"bot":true}`+"\n"+`{"features":{"mouse_colour":0},"bot":false}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), []string{"risk", "train", "--in", alien, "--out", model, "--version", "v"}, noEnv, io.Discard, io.Discard); err == nil ||
		!strings.Contains(err.Error(), `"mouse_colour" is not one a node computes`) {
		t.Fatalf("training on an unknown feature: %v", err)
	}
}

// TestRiskSettings: serve's check loads the model and the networks it is given, names the
// model's version, and refuses a broken model file, a model's setting without a model, and a
// threshold out of range.
func TestRiskSettings(t *testing.T) {
	dir := t.TempDir()
	model, nets := filepath.Join(dir, "m.json"), filepath.Join(dir, "nets.txt")
	writeDrawn(t, filepath.Join(dir, "l.jsonl"), 1, 500, 0)
	if err := run(context.Background(), []string{"risk", "train", "--in", filepath.Join(dir, "l.jsonl"), "--out", model, "--version", "m9"}, noEnv, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(nets, []byte("198.51.100.0/24\n203.0.113.0/24 # a proxy\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(env map[string]string) (map[string]any, error) {
		var out bytes.Buffer
		if err := checkCmd(nil, env, &out, io.Discard); err != nil {
			return nil, err
		}
		var got map[string]any
		return got, json.Unmarshal(out.Bytes(), &got)
	}
	got, err := check(map[string]string{"SECKILL_RISK_MODEL": model, "SECKILL_RISK_NETWORKS": nets, "SECKILL_RISK_SHADOW": "on"})
	if err != nil || got["risk_model"] != "m9" || got["risk_networks"] != 2.0 || got["risk_shadow"] != true {
		t.Fatalf("check with a model: %v, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "broken.json"), []byte(`{"format":`), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, env := range map[string]map[string]string{
		"a broken model":          {"SECKILL_RISK_MODEL": filepath.Join(dir, "broken.json")},
		"a missing model":         {"SECKILL_RISK_MODEL": filepath.Join(dir, "nope.json")},
		"a threshold, no model":   {"SECKILL_RISK_CHALLENGE_AT": "0.5"},
		"shadow, no model":        {"SECKILL_RISK_SHADOW": "on"},
		"a threshold of 2":        {"SECKILL_RISK_MODEL": model, "SECKILL_RISK_BLOCK_AT": "2"},
		"challenge above block":   {"SECKILL_RISK_MODEL": model, "SECKILL_RISK_CHALLENGE_AT": "0.95"},
		"a broken networks file":  {"SECKILL_RISK_NETWORKS": model},
		"a missing networks file": {"SECKILL_RISK_NETWORKS": filepath.Join(dir, "nope.txt")},
	} {
		if _, err := check(env); err == nil {
			t.Errorf("%s: passed the check", name)
		}
	}
}

// TestRiskGen: risk gen records the crowd's grabs on a server of its own and writes them
// labelled; here bots alone (the people's pages are internal/bench's TestRiskModelFromTheCrowd).
func TestRiskGen(t *testing.T) {
	out := filepath.Join(t.TempDir(), "set.jsonl")
	var b bytes.Buffer
	if err := run(context.Background(), []string{"risk", "gen", "--out", out, "--humans", "0", "--bots", "40", "--seed", "3", "--span", "1s", "--json"},
		noEnv, &b, io.Discard); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Accounts map[string]int `json:"accounts"`
		Grabs    map[string]int `json:"grabs"`
		Requests int            `json:"requests"`
		BotReqs  int            `json:"bot_requests"`
	}
	if err := json.Unmarshal(b.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, b.String())
	}
	sent, accounts := 0, 0
	for p, n := range rep.Grabs {
		sent += n
		accounts += rep.Accounts[p]
	}
	if accounts != 40 || rep.Requests == 0 || rep.Requests > sent || rep.BotReqs != rep.Requests {
		t.Fatalf("report %+v", rep)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, rows, isBot, err := risk.ReadLabelled(f, []string{"page_signals", "datacenter"})
	if err != nil || len(rows) != rep.Requests {
		t.Fatalf("the labelled set: %d rows, %v", len(rows), err)
	}
	dc := 0
	for i, row := range rows {
		if !isBot[i] {
			t.Fatalf("row %d of a bots-only crowd labelled a person's", i)
		}
		dc += int(row[1])
	}
	if dc == 0 {
		t.Error("no grab came from the datacenter list")
	}
	for _, bad := range [][]string{{"risk", "gen"}, {"risk", "gen", "--out", out, "--humans", "0", "--bots", "0"},
		{"risk", "gen", "--out", out, "--tabs", "0"}} {
		if err := run(context.Background(), bad, noEnv, io.Discard, io.Discard); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// TestRiskWindowsSharedByNodes: two nodes on one Redis and one MariaDB with the rule of 2
// accounts per address, and four accounts from one address (this test's) whose grabs the load
// balancer sends to one node, then the other. Each node sees two of them; the windows are on
// Redis, so the third and the fourth are challenged wherever they land.
func TestRiskWindowsSharedByNodes(t *testing.T) {
	env := testEnv(dbtest.MySQLDSN(t), "SECKILL_REDIS", redistest.Start(t, redistest.Options{}).URL(),
		"SECKILL_RISK_ACCOUNTS_PER_IP", "2", "SECKILL_RATE_USER", "0")
	ctx, stop := context.WithCancel(context.Background())
	a, doneA := launch(t, ctx, env)
	b, doneB := launch(t, ctx, env)
	defer func() {
		stop()
		for _, done := range []<-chan error{doneA, doneB} {
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
		}
	}()
	nodes := []*client{newClient(t, a), newClient(t, b)}
	id := nodes[0].CreateItem(10, 1, 15*time.Minute)
	for i, want := range []int{http.StatusAccepted, http.StatusAccepted, http.StatusForbidden, http.StatusForbidden} {
		c := nodes[i%2]
		status, body, err := c.Call("POST", "/api/activities/"+id+"/grab", c.Token(fmt.Sprint("acct-", i)), "")
		if err != nil || status != want {
			t.Errorf("account %d of one address, on node %d: %d %v %v, want %d", i+1, i%2, status, body, err, want)
		}
		if want == http.StatusForbidden && !strings.Contains(fmt.Sprint(body), "CHALLENGE_REQUIRED") {
			t.Errorf("account %d of one address: %v, want CHALLENGE_REQUIRED", i+1, body)
		}
	}
}
