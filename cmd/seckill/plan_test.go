package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"seckill/internal/capacity"
)

// theResults is the repository's bench results, seen from this package's directory.
const theResults = "../../docs/bench/results.jsonl"

func TestPlan(t *testing.T) {
	var out bytes.Buffer
	args := []string{"plan", "--results", theResults, "--peak", "1000000", "--stock", "1000"}
	if err := run(context.Background(), args, noEnv, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1,000,000 users", "API nodes", "Redis masters", "worker nodes", "SECKILL_RATE_NODE="} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plan: no %q in\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := run(context.Background(), append(args, "--json", "--min-replicas", "1"), noEnv, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var p capacity.Plan
	if err := json.Unmarshal(out.Bytes(), &p); err != nil {
		t.Fatalf("--json: %v\n%s", err, out.String())
	}
	if p.Sale.Users != 1_000_000 || p.Sale.MinReplicas != 1 || p.Replicas != 2 || p.APINodes < 2 || !strings.Contains(p.Costs.Setup, "min-replicas 1,") {
		t.Errorf("--json --min-replicas 1: %+v", p)
	}

	// A ramp: 600,000 users clicking twice over 10 minutes make a peak of 2,000 a second.
	out.Reset()
	ramp := []string{"plan", "--results", theResults, "--arrival", "ramp:10m", "--clicks", "2", "--users", "600000", "--stock", "1000"}
	if err := run(context.Background(), ramp, noEnv, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if want := "at a peak of 2,000 grab requests a second (2 clicks a user over 10m0s)"; !strings.Contains(out.String(), want) {
		t.Errorf("ramp: no %q in\n%s", want, out.String())
	}
	out.Reset()
	if err := run(context.Background(), append(ramp, "--json"), noEnv, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	p = capacity.Plan{}
	if err := json.Unmarshal(out.Bytes(), &p); err != nil {
		t.Fatalf("--json: %v\n%s", err, out.String())
	}
	if p.Sale.Ramp != 10*time.Minute || p.WinRate > 2000 || p.RateNode != 0 {
		t.Errorf("ramp --json: %+v", p)
	}
}

func TestPlanRefusesBadInput(t *testing.T) {
	results := []string{"--results", theResults}
	bad := t.TempDir() + "/bad.jsonl"
	if err := os.WriteFile(bad, []byte("{\"scenario\":\"x\"}\n{oops\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no peak", append(results, "--stock", "10"), "--peak 0"},
		{"no stock", append(results, "--peak", "10"), "--stock 0"},
		{"a coupon", append(results, "--peak", "10", "--stock", "1", "--kind", "coupon"), `--kind "coupon"`},
		{"a sharded red packet", append(results, "--peak", "10", "--stock", "10", "--kind", "redpacket", "--shards", "2"), "only an item's stock shards"},
		{"no headroom", append(results, "--peak", "10", "--stock", "1", "--headroom", "0"), "--headroom 0"},
		{"stray argument", append(results, "--peak", "10", "--stock", "1", "now"), "unexpected arguments"},
		{"unknown flag", []string{"--qps", "10"}, "flag provided but not defined"},
		{"no such file", []string{"--results", "/nonexistent/results.jsonl", "--peak", "10", "--stock", "1"}, "/nonexistent/results.jsonl"},
		{"the default file away from the repository", []string{"--peak", "10", "--stock", "1"}, "run seckill plan from the repository"},
		{"a broken file", []string{"--results", bad, "--peak", "10", "--stock", "1"}, "result line 2"},
		{"an arrival of no shape", append(results, "--peak", "10", "--stock", "1", "--arrival", "wave"), "want burst or ramp:DURATION"},
		{"a ramp of no length", append(results, "--stock", "1", "--users", "10", "--arrival", "ramp:soon"), "ramp:DURATION such as"},
		{"a ramp of nobody", append(results, "--stock", "1", "--arrival", "ramp:10m"), "needs --users"},
		{"replicas never measured", append(results, "--peak", "10", "--stock", "1", "--min-replicas", "2"), "no usable bench run with --min-replicas 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), append([]string{"plan"}, tc.args...), noEnv, &out, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			if out.Len() != 0 {
				t.Fatalf("a refused plan printed %q", out.String())
			}
		})
	}
}

// TestCapacityDocIsThePlan holds docs/CAPACITY.md to the program: each block the document shows
// as the output of a seckill plan command is what that command prints from the repository's
// results.
func TestCapacityDocIsThePlan(t *testing.T) {
	doc, err := os.ReadFile("../../docs/CAPACITY.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```sh\n\\$ seckill plan ([^\n]*)\n(.*?)```").FindAllSubmatch(doc, -1)
	if len(blocks) < 2 {
		t.Fatalf("docs/CAPACITY.md shows %d plans; want the design documents' target at least, plain and with a replica", len(blocks))
	}
	for _, b := range blocks {
		args := append([]string{"plan", "--results", theResults}, strings.Fields(string(b[1]))...)
		var out bytes.Buffer
		if err := run(context.Background(), args, noEnv, &out, io.Discard); err != nil {
			t.Fatalf("seckill %s: %v", b[1], err)
		}
		if got, want := out.String(), string(b[2]); got != want {
			t.Errorf("docs/CAPACITY.md shows for seckill plan %s:\n%s\nthe program prints:\n%s", b[1], want, got)
		}
	}
}

// TestPlanForAnActivity runs seckill plan --activity against a node of the binary: the
// reservation sale's forecast (40 reserved, on the prior: 32 buyers, 96 clicks), the plan for
// its peak and the change to deploy/k8s, as one object per resource; and the flags that do not
// go with it refused.
func TestPlanForAnActivity(t *testing.T) {
	base := startRun(t, testEnv(sqliteDSN(t)))
	c := newClient(t, base)
	start := time.Now().UTC().Add(time.Hour).Truncate(time.Second)
	id := c.Must("POST", "/api/admin/activities", testAdmin, fmt.Sprintf(`{"name":"launch","kind":"item","stock":10,"price_cents":100,
		"start_at":%q,"end_at":%q,"admission":"reservation","waves":4,"wave_interval_s":60}`,
		start.Format(time.RFC3339), start.Add(time.Hour).Format(time.RFC3339)), http.StatusCreated)["id"].(string)
	for i := range 40 {
		c.Must("POST", "/api/activities/"+id+"/reservations", c.Token(fmt.Sprint("u", i)), "", http.StatusCreated)
	}
	patch := filepath.Join(t.TempDir(), "patch.yaml")
	var out bytes.Buffer
	args := []string{"plan", "--activity", id, "--url", base, "--admin-token", testAdmin, "--cores", "4", "--patch", patch}
	if err := run(context.Background(), args, noEnv, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Activity " + id + ": 40 reserved. Expected 32 buyers (0.80 a reservation), 96 clicks (3.00 a buyer), a peak of 8.4 requests a second",
		"the prior", "API nodes", "worker nodes", "The change to deploy/k8s for the sale is in " + patch} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := run(context.Background(), append(args[:len(args)-2], "--json"), noEnv, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var f struct {
		Reserved int64
		Plan     capacity.Plan
	}
	if err := json.Unmarshal(out.Bytes(), &f); err != nil || f.Reserved != 40 || f.Plan.Sale.Cores != 4 || f.Plan.APINodes < 2 {
		t.Fatalf("--json: %+v, %v\n%s", f, err, out.String())
	}
	b, err := os.ReadFile(patch)
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(b), "\n---\n")
	if len(docs) != 4 || !strings.Contains(docs[0], "kubectl apply --server-side") {
		t.Fatalf("the patch: %d parts\n%s", len(docs), b)
	}
	want := []struct {
		kind, name, field string
		value             int
	}{
		{"Deployment", "seckill-api", "replicas", f.Plan.APINodes},
		{"HorizontalPodAutoscaler", "seckill-api", "minReplicas", f.Plan.APINodes},
		{"Deployment", "seckill-worker", "replicas", f.Plan.WorkerNodes},
	}
	for i, w := range want {
		var d struct {
			Kind     string                `json:"kind"`
			Metadata struct{ Name string } `json:"metadata"`
			Spec     map[string]int        `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(docs[i+1]), &d); err != nil || d.Kind != w.kind || d.Metadata.Name != w.name || d.Spec[w.field] != w.value {
			t.Errorf("the patch's object %d: %+v, %v; want %s %s with %s %d", i+1, d, err, w.kind, w.name, w.field, w.value)
		}
	}
	for _, bad := range [][]string{
		{"plan", "--activity", id, "--admin-token", testAdmin},
		{"plan", "--activity", id, "--url", base},
		{"plan", "--activity", id, "--url", base, "--admin-token", testAdmin, "--peak", "100"},
		{"plan", "--activity", id, "--url", "ftp://x", "--admin-token", testAdmin},
		{"plan", "--activity", "nope", "--url", base, "--admin-token", testAdmin},
		{"plan", "--activity", id, "--url", base, "--admin-token", "wrong"},
	} {
		if err := run(context.Background(), bad, noEnv, io.Discard, io.Discard); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
