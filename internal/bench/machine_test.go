package bench

import (
	"bytes"
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestParseCPUTimes: /proc/stat's first line gives the machine's busy, iowait and steal ticks out
// of all of them; two readings give the shares of the interval between them.
func TestParseCPUTimes(t *testing.T) {
	a, err := parseCPUTimes("cpu  100 10 40 800 20 5 5 20 7 0")
	if err != nil {
		t.Fatal(err)
	}
	if want := (cpuTimes{busy: 160, iowait: 20, steal: 20, total: 1000}); a != want {
		t.Fatalf("%+v, want %+v", a, want)
	}
	b, _ := parseCPUTimes("cpu  150 10 50 880 30 5 5 70 7 0") // 200 ticks on: 60 busy, 10 iowait, 50 steal
	s := sampleOf(a, b, 40*time.Millisecond)
	if want := (MachineSample{BusyPct: 30, IOWaitPct: 5, StealPct: 25, LateMS: 40}); !reflect.DeepEqual(s, want) {
		t.Fatalf("%+v, want %+v", s, want)
	}
	if s := sampleOf(b, b, -time.Millisecond); !reflect.DeepEqual(s, MachineSample{}) {
		t.Fatalf("no tick, woken early: %+v, want zeros", s)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 3", "cpu 1 2 3 4 5 6 7 x", "cpu 18446744073709551615 1 0 0 0 0 0 0"} {
		if _, err := parseCPUTimes(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestSampleMachine: on this machine the sampler adds a line an interval, each a share of the
// cores that fits in them, until it is stopped; with a meter, each line says what the roles used,
// here this test's own process, kept busy.
func TestSampleMachine(t *testing.T) {
	if _, err := readCPUTimes(); err != nil {
		t.Skipf("no /proc/stat here (%v): the sampler adds nothing", err) // not Linux
	}
	var buf bytes.Buffer
	h := NewHistoryWriter(&buf)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	spin := make(chan struct{})
	go func() { // about a core's worth for the meter to see
		for x := 0; ; x++ {
			select {
			case <-spin:
				return
			default:
			}
		}
	}()
	defer close(spin)
	go func() { defer close(done); sampleMachine(ctx, h, 20*time.Millisecond, ProcessTree("self")) }()
	for wait := time.Now().Add(30 * time.Second); h.Len() < 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(wait) {
			t.Fatalf("%d samples in 30 s", h.Len())
		}
	}
	cancel()
	<-done
	n := h.Len()
	time.Sleep(50 * time.Millisecond)
	if h.Len() != n {
		t.Fatalf("%d samples after it was stopped", h.Len()-n)
	}
	if err := h.Flush(); err != nil {
		t.Fatal(err)
	}
	history, err := ReadHistory(&buf)
	if err != nil {
		t.Fatal(err)
	}
	used := 0.0
	for _, r := range history {
		m := r.Machine
		if r.Op != OpMachine || m == nil || r.End <= r.Start || m.LateMS < 0 ||
			m.BusyPct < 0 || m.IOWaitPct < 0 || m.StealPct < 0 || m.BusyPct+m.IOWaitPct+m.StealPct > 100.001 {
			t.Fatalf("sample %+v (%+v)", r, m)
		}
		for role, pct := range m.Roles {
			if role != "self" || pct <= 0 || pct > 100.001 {
				t.Fatalf("sample %+v: roles %v, want only self, a share of the machine", r, m.Roles)
			}
			used += pct
		}
	}
	if used == 0 {
		t.Fatalf("%d samples of a spinning process, none with its role's share", len(history))
	}
}

// TestRolesOf: each role's share of the cores over the interval, its processes summed; one
// started since the first reading counts from zero, one gone counts nothing, an idle role is left
// out.
func TestRolesOf(t *testing.T) {
	ms := time.Millisecond
	a := []Usage{{1, "bench", 100 * ms}, {2, "api", 50 * ms}, {3, "api", 10 * ms}, {4, "redis", 7 * ms}, {5, "worker", 9 * ms}}
	b := []Usage{{1, "bench", 150 * ms}, {2, "api", 100 * ms}, {3, "api", 60 * ms}, {4, "redis", 7 * ms}, {6, "worker", 25 * ms}}
	got := rolesOf(a, b, 250*ms, 2) // 500 ms of cores
	want := map[string]float64{"bench": 10, "api": 20, "worker": 5}
	if len(got) != len(want) {
		t.Fatalf("%v, want %v", got, want)
	}
	for role, pct := range want {
		if d := got[role] - pct; d > 1e-9 || d < -1e-9 {
			t.Fatalf("%v, want %v", got, want)
		}
	}
	if got := rolesOf(a, b, 0, 2); got != nil {
		t.Fatalf("no time passed: %v", got)
	}
	if got := rolesOf(nil, nil, time.Second, 2); got != nil {
		t.Fatalf("no meter: %v", got)
	}
}

// TestAvailabilitySaysWhatTheMachineDid: a broken promise's problem names the most the machine
// was busy, waiting for the disk, taken by the hypervisor and late in the samples that overlap
// the heal up to the first 202 (or the refusal), and no sample outside them.
func TestAvailabilitySaysWhatTheMachineDid(t *testing.T) {
	const s = 1_000_000
	sample := func(from, to int64, steal, late float64) Record {
		return Record{Op: OpMachine, Start: from, End: to, Machine: &MachineSample{BusyPct: 40, StealPct: steal, LateMS: late,
			Roles: map[string]float64{"api": steal / 4, "bench": 5, "redis": 1, "database": 2, "worker": 3, "sentinel": 0.5}}}
	}
	grab := func(node int, start, end int64, status int) Record {
		return Record{User: "u", Node: node, Start: start, End: end, Status: status, Outcome: outcomeOf(status)}
	}
	history := []Record{
		sample(0, s, 90, 900), // before the heal: not its
		{Op: OpStrike, Detail: "kill-api 0", Start: s, End: s},
		{Op: OpHeal, Detail: "kill-api 0", Start: 3 * s, End: 4 * s},
		sample(4*s, 4*s+s/4, 61, 12),
		sample(4*s+s/4, 4*s+s/2, 20, 300),
		grab(1, 4*s, 6*s, http.StatusAccepted),
		grab(0, 5*s+s/2, 5*s+s/2+1, http.StatusServiceUnavailable), // a new click refused
		sample(5*s+s/4, 5*s+s/2+s/4, 5, 7),
		sample(7*s, 8*s, 95, 990), // after: not its
		grab(2, 100*s, 100*s+1, http.StatusAccepted),
	}
	a := Availability(history)
	if a.Late != 1 || a.Refusing != 1 || len(a.Problems) != 2 {
		t.Fatalf("%+v; want one late heal and a node refusing", a)
	}
	for i, want := range []string{"3 samples, the most of each): busy 40 %, iowait 0 %, steal 61 %, sampler 300 ms late, by role on average: api 7 %, bench 5 %, worker 3 %, database 2 %",
		"1 sample, the most of each): busy 40 %, iowait 0 %, steal 5 %, sampler 7 ms late, by role on average: bench 5 %, worker 3 %, database 2 %, api 1 %"} {
		if !strings.Contains(a.Problems[i], want) {
			t.Errorf("problem %q does not say %q", a.Problems[i], want)
		}
	}
	var bare []Record
	for _, r := range history {
		if r.Op != OpMachine {
			bare = append(bare, r)
		}
	}
	if b := Availability(bare); b.Late != 1 || b.Refusing != 1 || strings.Contains(strings.Join(b.Problems, " "), "machine") {
		t.Fatalf("without samples: %+v", b)
	}
}
