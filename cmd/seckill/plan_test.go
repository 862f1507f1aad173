package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

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
	if p.Sale.Users != 1_000_000 || p.Sale.MinReplicas != 1 || p.Replicas != 2 || p.APINodes < 2 || p.Costs.Setup == nil || p.Costs.Setup.MinReplicas != 1 {
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
