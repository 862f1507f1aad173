package bench

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A nemesis run shares its machine with the deployment it strikes: here two cores of a VM, whose
// hypervisor takes them away at times (steal), up to two thirds for seconds on end. When every
// node of a run stalls at once, the first question is whether the machine did; so the run samples
// the machine as it goes, into its history (OpMachine), and its availability says what the machine
// did around a heal it finds broken (BENCHMARKS.md §19: Cluster seed 20's stall, unexplained for
// want of such samples).

// MachineSample is the machine over one interval of a nemesis run: the share of all its cores
// busy, waiting for the disk (iowait) and taken by the hypervisor (steal), and how much later
// than asked its sampler woke (a machine paused whole shows as that, not as steal). Roles, where
// the run has a Meter, is who kept it busy: each role's share of all the cores (ProcessTree's
// roles: "api", "worker", "redis", "sentinel", "database", and "bench" for the load generator
// with its proxies), so that a heal the machine starved says what starved it.
type MachineSample struct {
	BusyPct   float64            `json:"busy_pct"`
	IOWaitPct float64            `json:"iowait_pct"`
	StealPct  float64            `json:"steal_pct"`
	LateMS    float64            `json:"late_ms"`
	Roles     map[string]float64 `json:"roles,omitempty"`
}

// machineEvery is how often a nemesis run samples its machine.
const machineEvery = 250 * time.Millisecond

// cpuTimes is the time all the machine's cores have spent so far, in the kernel's ticks.
type cpuTimes struct{ busy, iowait, steal, total uint64 }

// readCPUTimes reads the machine's times from /proc/stat (Linux).
func readCPUTimes() (cpuTimes, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	return parseCPUTimes(line)
}

// parseCPUTimes reads /proc/stat's first line, "cpu" and the ticks of user, nice, system, idle,
// iowait, irq, softirq and steal (guest time, after them, is counted in user already).
func parseCPUTimes(line string) (cpuTimes, error) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTimes{}, fmt.Errorf("/proc/stat: %q is not the machine's cpu line", line)
	}
	var v [8]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[i+1], 10, 64)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("/proc/stat: %q: %w", line, err)
		}
		v[i] = n
	}
	var t cpuTimes
	for _, n := range v {
		if t.total+n < t.total {
			return cpuTimes{}, fmt.Errorf("/proc/stat: %q: the times overflow", line)
		}
		t.total += n
	}
	t.busy, t.iowait, t.steal = v[0]+v[1]+v[2]+v[5]+v[6], v[4], v[7]
	return t, nil
}

// sampleOf is the machine between readings a and b, late the sampler's lateness.
func sampleOf(a, b cpuTimes, late time.Duration) MachineSample {
	s := MachineSample{LateMS: float64(max(late, 0).Microseconds()) / 1e3}
	if b.total <= a.total {
		return s // no tick between them
	}
	pct := func(x, y uint64) float64 { return 100 * float64(y-x) / float64(b.total-a.total) }
	s.BusyPct, s.IOWaitPct, s.StealPct = pct(a.busy, b.busy), pct(a.iowait, b.iowait), pct(a.steal, b.steal)
	return s
}

// rolesOf is each role's share of cores cores over wall, by the CPU time its processes used from
// reading a to reading b of a Meter: a process first read in b started since a and counts from
// zero; one gone by b counts nothing of its last interval. Roles that used nothing are left out.
func rolesOf(a, b []Usage, wall time.Duration, cores int) map[string]float64 {
	if wall <= 0 || cores <= 0 {
		return nil
	}
	before := make(map[int]time.Duration, len(a))
	for _, u := range a {
		before[u.PID] = u.CPU
	}
	var roles map[string]float64
	for _, u := range b {
		used := u.CPU - before[u.PID]
		if used <= 0 {
			continue
		}
		if roles == nil {
			roles = map[string]float64{}
		}
		roles[u.Role] += 100 * used.Seconds() / (wall.Seconds() * float64(cores))
	}
	return roles
}

// sampleMachine adds to h, every interval until ctx ends, an OpMachine line of the machine over
// it (Start and End the interval's), with the roles' shares when meter is not nil. Where
// /proc/stat cannot be read (not Linux) it adds none.
func sampleMachine(ctx context.Context, h *HistoryWriter, every time.Duration, meter Meter) {
	prev, err := readCPUTimes()
	if err != nil {
		return
	}
	read := func() []Usage {
		if meter == nil {
			return nil
		}
		return meter()
	}
	prevUse := read()
	from := time.Now()
	timer := time.NewTimer(every)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		now := time.Now()
		cur, err := readCPUTimes()
		if err != nil {
			return
		}
		use := read()
		s := sampleOf(prev, cur, now.Sub(from)-every)
		s.Roles = rolesOf(prevUse, use, now.Sub(from), runtime.NumCPU())
		h.Add(Record{Op: OpMachine, Start: from.UnixMicro(), End: now.UnixMicro(), Machine: &s})
		prev, prevUse, from = cur, use, now
		timer.Reset(every)
	}
}

// machineDuring says what the machine did from from to to by the samples of it that overlap the
// span (the most of each measure, and the roles that used the most of it on average), or "" when
// none does.
func machineDuring(samples []Record, from, to int64) string {
	var worst MachineSample
	roles := map[string]float64{}
	n := 0
	for _, r := range samples {
		if r.Machine == nil || r.End < from || r.Start > to {
			continue
		}
		n++
		for role, pct := range r.Machine.Roles {
			roles[role] += pct
		}
		worst.BusyPct = max(worst.BusyPct, r.Machine.BusyPct)
		worst.IOWaitPct = max(worst.IOWaitPct, r.Machine.IOWaitPct)
		worst.StealPct = max(worst.StealPct, r.Machine.StealPct)
		worst.LateMS = max(worst.LateMS, r.Machine.LateMS)
	}
	if n == 0 {
		return ""
	}
	of := fmt.Sprintf("%d samples", n)
	if n == 1 {
		of = "1 sample"
	}
	return fmt.Sprintf("; the machine meanwhile (%s, the most of each): busy %.0f %%, iowait %.0f %%, steal %.0f %%, sampler %.0f ms late%s",
		of, worst.BusyPct, worst.IOWaitPct, worst.StealPct, worst.LateMS, busiestRoles(roles, n))
}

// busiestRoles names the (at most) four roles with the most of sums, each sum over n samples,
// as their mean shares of the machine: ", by role on average: api 41 %, bench 30 %".
func busiestRoles(sums map[string]float64, n int) string {
	roles := slices.Collect(maps.Keys(sums))
	slices.SortFunc(roles, func(a, b string) int {
		if c := cmp.Compare(sums[b], sums[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	if len(roles) > 4 {
		roles = roles[:4]
	}
	var parts []string
	for _, role := range roles {
		parts = append(parts, fmt.Sprintf("%s %.0f %%", role, sums[role]/float64(n)))
	}
	if len(parts) == 0 {
		return ""
	}
	return ", by role on average: " + strings.Join(parts, ", ")
}
