package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseStat(t *testing.T) {
	// A name with a space and parentheses: the fields count from the last ')'.
	line := "4242 (redis (x) 1) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 75 3 4 20 0 5 0 99 1000 10 18446744073709551615\n"
	comm, ppid, cpu, err := parseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if comm != "redis (x) 1" || ppid != 17 || cpu != 3250*time.Millisecond {
		t.Fatalf("got %q ppid %d cpu %s, want %q ppid 17 cpu 3.25s (325 ticks)", comm, ppid, cpu, "redis (x) 1")
	}
	for _, bad := range []string{"", "4242 redis S 1", "1 (a) S x 1 1 0 -1 0 0 0 0 0 1 1", "1 (a) S 1 1", "1 (a) S 1 1 1 0 -1 0 0 0 0 0 -5 1"} {
		if _, _, _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q): no error", bad)
		}
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("1 (sh) S 0 1 1 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 1 1 1"))
	f.Add([]byte("1 ()) R 0 1 1 0 -1 0 0 0 0 0 0 0"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, cpu, err := parseStat(b)
		if err == nil && cpu < 0 {
			t.Fatalf("negative CPU time %s from %q", cpu, b)
		}
	})
}

func TestCPUOf(t *testing.T) {
	s := time.Second
	start := []Usage{{1, "bench", 10 * s}, {2, "api", 5 * s}, {3, "redis", 1 * s}, {4, "redis", 1 * s}, {5, "api", 0}}
	crowd := []Usage{{1, "bench", 12 * s}, {2, "api", 8 * s}, {3, "redis", 3 * s}, {4, "redis", 1500 * time.Millisecond},
		{6, "api", 1 * s}} // 5 was killed; 6 started in the crowd
	drained := []Usage{{1, "bench", 12 * s}, {2, "api", 9 * s}, {3, "redis", 4 * s}, {4, "redis", 1500 * time.Millisecond}, {6, "api", 1 * s}}
	got := cpuOf(start, crowd, drained)
	want := []RoleCPU{
		{Role: "api", Processes: 3, CrowdS: 3 + 1, DrainS: 1, BusiestS: 4},
		{Role: "bench", Processes: 1, CrowdS: 2, DrainS: 0, BusiestS: 2},
		{Role: "redis", Processes: 2, CrowdS: 2.5, DrainS: 1, BusiestS: 3},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("cpuOf (-want +got):\n%s", diff)
	}
	if got := cpuOf(nil, nil, nil); len(got) != 0 {
		t.Fatalf("no readings: %+v", got)
	}
}

// TestReadTree reads a made-up /proc: roles by command name, by SECKILL_ROLE and from the
// parent (PostgreSQL's backends), and nothing outside the tree.
func TestReadTree(t *testing.T) {
	proc := t.TempDir()
	add := func(pid, ppid int, comm string, ticks int, cmdline, environ string) {
		dir := filepath.Join(proc, fmt.Sprint(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		stat := fmt.Sprintf("%d (%s) S %d 1 1 0 -1 0 0 0 0 0 %d 0 0 0 20 0 1 0 1 1 1\n", pid, comm, ppid, ticks)
		for name, text := range map[string]string{"stat": stat, "cmdline": cmdline, "environ": environ} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	add(10, 1, "bench.test", 500, "", "")
	add(11, 10, "redis-server", 100, "redis-server\x00--port\x006379\x00", "")
	add(12, 10, "redis-server", 3, "redis-server\x00s.conf\x00--sentinel\x00", "")
	add(13, 10, "seckill", 200, "seckill\x00serve\x00", "HOME=/root\x00SECKILL_ROLE=api\x00")
	add(14, 10, "postgres", 40, "", "")
	add(15, 14, "postgres: bench", 60, "", "")
	add(16, 10, "sh", 1, "", "")
	add(20, 1, "redis-server", 999, "", "") // not ours
	if err := os.MkdirAll(filepath.Join(proc, "self"), 0o755); err != nil {
		t.Fatal(err)
	}
	got := readTree(proc, 10, "bench")
	want := []Usage{{10, "bench", 5 * time.Second}, {11, "redis", time.Second}, {12, "sentinel", 30 * time.Millisecond},
		{13, "api", 2 * time.Second}, {14, "database", 400 * time.Millisecond}, {15, "database", 600 * time.Millisecond},
		{16, "sh", 10 * time.Millisecond}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("readTree (-want +got):\n%s", diff)
	}
	if got := readTree(filepath.Join(proc, "absent"), 10, "bench"); got != nil {
		t.Fatalf("no proc: %+v", got)
	}
}

// TestProcessTreeSeesAChild meters this process and a child that burns CPU, on the real /proc.
func TestProcessTreeSeesAChild(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the meter reads Linux's /proc") // the project runs and is tested on Linux
	}
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done; sleep 30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	meter := ProcessTree("test")
	deadline := time.Now().Add(30 * time.Second)
	for {
		var self, child time.Duration
		for _, u := range meter() {
			switch {
			case u.PID == os.Getpid() && u.Role == "test":
				self = u.CPU
			case u.PID == cmd.Process.Pid && u.Role == "sh":
				child = u.CPU
			}
		}
		if self > 0 && child >= 100*time.Millisecond {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: this process %s, the child %s of CPU; want both seen, the child at least 100 ms", self, child)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
