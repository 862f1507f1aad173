package e2etest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"seckill/internal/bench"
	"seckill/internal/testtier"
)

// BenchResult is the JSON line `seckill bench --json` ends with.
type BenchResult struct {
	OK         bool    `json:"ok"`
	Activity   string  `json:"activity"`
	Mode       string  `json:"mode"`
	Requests   int64   `json:"requests"`
	Wins       int64   `json:"wins"`
	Stock      int64   `json:"stock"`
	Oversell   int64   `json:"oversell"`
	Undersell  int64   `json:"undersell"`
	Duplicates int64   `json:"duplicates"`
	Lost       int64   `json:"lost"`
	RPS        float64 `json:"rps"`
	P50        float64 `json:"p50_ms"`
	P99        float64 `json:"p99_ms"`
	P999       float64 `json:"p999_ms"`
	History    string  `json:"history"`
	Nodes      int     `json:"nodes"`
	Unanswered int64   `json:"unanswered"`
	Demand     int64   `json:"demand"`
	Restocked  int64   `json:"restocked"`
	Unreleased int64   `json:"unreleased"`
	Fault      *struct {
		Kind      string   `json:"kind"`
		AtS       float64  `json:"at_s"`
		RecoveryS float64  `json:"recovery_s"`
		OutageS   *float64 `json:"outage_s"`
		Busy      int      `json:"busy"`
		BusyShare float64  `json:"busy_share"`
	} `json:"fault"`
	Outcomes map[string]struct {
		Count int64 `json:"count"`
	} `json:"outcomes"`
	AfterEnd      int64                    `json:"after_end"`
	ChangesFailed int64                    `json:"changes_failed"`
	Operator      *bench.OperatorReport    `json:"operator"`
	Line          *bench.LineReport        `json:"line"`
	Reservation   *bench.ReservationReport `json:"reservation"`
	CPU           []bench.RoleCPU          `json:"cpu"`
	Setup         *bench.Setup             `json:"setup"`
	Payments      *bench.PaymentsReport    `json:"payments"`
}

// CheckCPU checks that the result says each role's processes used CPU in the run.
func CheckCPU(t testing.TB, res BenchResult, roles ...string) {
	t.Helper()
	used := map[string]float64{}
	for _, c := range res.CPU {
		if c.CrowdS < 0 || c.DrainS < 0 || c.BusiestS > c.CrowdS+c.DrainS+1e-9 || c.Processes < 1 {
			t.Errorf("cpu of %s: %+v", c.Role, c)
		}
		used[c.Role] = c.CrowdS + c.DrainS
	}
	for _, role := range roles {
		if used[role] <= 0 {
			t.Errorf("cpu %+v: want some for %s", res.CPU, role)
		}
	}
}

// Bench runs `seckill bench ARGS --json --history FILE` through run (the command in this process,
// or the built binary) and returns its result line and the history it wrote.
func Bench(t testing.TB, run func(args []string, stdout io.Writer) error, args ...string) (BenchResult, []bench.Record) {
	t.Helper()
	testtier.NeedsServer(t, "a seckill node and its crowd")
	path := filepath.Join(t.TempDir(), "history.jsonl")
	var out bytes.Buffer
	args = append([]string{"bench", "--json", "--history", path}, args...)
	if err := run(args, &out); err != nil {
		t.Fatalf("seckill %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var res BenchResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("last line is not the JSON result: %v\n%s", err, out.String())
	}
	history := ReadHistory(t, path)
	if res.History != path || int64(len(history)) != res.Requests {
		t.Fatalf("history %s has %d lines; the result names %s with %d requests", path, len(history), res.History, res.Requests)
	}
	return res, history
}

// BenchBinary is Bench through the built binary.
func BenchBinary(t testing.TB, args ...string) (BenchResult, []bench.Record) {
	t.Helper()
	return Bench(t, func(args []string, stdout io.Writer) error {
		cmd := exec.Command(Binary(t), args...)
		cmd.Stdout, cmd.Stderr = stdout, os.Stderr
		return cmd.Run()
	}, args...)
}

// ErrorsOf tallies the failed requests of a history by status and error, for a failure's message.
func ErrorsOf(history []bench.Record) map[string]int {
	out := map[string]int{}
	for _, r := range history {
		if r.Outcome == bench.Error {
			out[fmt.Sprintf("%d %s", r.Status, r.Err)]++
		}
	}
	return out
}

// ReadHistory reads the history file bench wrote to path.
func ReadHistory(t testing.TB, path string) []bench.Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	history, err := bench.ReadHistory(f)
	if err != nil {
		t.Fatalf("history %s: %v", path, err)
	}
	return history
}
