package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Usage is the CPU time one process has used so far, and what it is to the run.
type Usage struct {
	PID  int
	Role string
	CPU  time.Duration
}

// Meter reads the CPU time of the processes a run measures. Sale.Run calls it when the crowd
// starts, when it has been answered and when the queue has drained.
type Meter func() []Usage

// RoleCPU is the CPU time the processes of one role used in the run, in seconds: while the
// crowd was answered, and while the queue drained after it. It is what sizes a deployment
// (seckill plan): CPU seconds per request, per grab and per order.
type RoleCPU struct {
	Role      string  `json:"role"`
	Processes int     `json:"processes"`
	CrowdS    float64 `json:"crowd_cpu_s"`
	DrainS    float64 `json:"drain_cpu_s"`
	// BusiestS is the crowd and drain time of the busiest process of the role: of a Redis
	// Cluster, the master that held the sale's keys.
	BusiestS float64 `json:"busiest_cpu_s"`
}

// cpuOf sums three readings of the meter (the crowd's start, its end, the drain's end) per
// role. A process counts from the first reading it appears in; one gone by a later reading
// (a node killed by a fault) is counted up to its last.
func cpuOf(start, crowd, drained []Usage) []RoleCPU {
	type span struct {
		role             string
		start, crowd, to time.Duration
		seen             bool
	}
	procs := map[int]*span{}
	var order []int
	read := func(us []Usage, set func(*span, time.Duration)) {
		for _, u := range us {
			p, ok := procs[u.PID]
			if !ok {
				p = &span{role: u.Role}
				procs[u.PID] = p
				order = append(order, u.PID)
				// A process first seen later started during the run: from zero.
			}
			set(p, u.CPU)
		}
	}
	read(start, func(p *span, d time.Duration) { p.start, p.crowd, p.to = d, d, d })
	read(crowd, func(p *span, d time.Duration) { p.crowd, p.to = d, d })
	read(drained, func(p *span, d time.Duration) { p.to = d })
	byRole := map[string]*RoleCPU{}
	var roles []string
	for _, pid := range order {
		p := procs[pid]
		r, ok := byRole[p.role]
		if !ok {
			r = &RoleCPU{Role: p.role}
			byRole[p.role] = r
			roles = append(roles, p.role)
		}
		r.Processes++
		r.CrowdS += (p.crowd - p.start).Seconds()
		r.DrainS += (p.to - p.crowd).Seconds()
		r.BusiestS = max(r.BusiestS, (p.to - p.start).Seconds())
	}
	slices.Sort(roles)
	out := make([]RoleCPU, 0, len(roles))
	for _, role := range roles {
		out = append(out, *byRole[role])
	}
	return out
}

// userHZ is the unit of the CPU times in /proc/PID/stat: USER_HZ, 100 on every Linux
// architecture Go runs on.
const userHZ = 100

// ProcessTree returns a Meter of this process (as role self) and of every process it started,
// however deep (a database's own children too), read from /proc: Redis servers are "redis",
// sentinels "sentinel", MariaDB, MySQL and PostgreSQL "database", seckill nodes their
// SECKILL_ROLE ("all", "api" or "worker"), anything else its command's name. Where there is no
// /proc (not Linux) it reads nothing.
func ProcessTree(self string) Meter {
	return func() []Usage { return readTree("/proc", os.Getpid(), self) }
}

// readTree reads the tree of processes under root from the proc file system at proc.
func readTree(proc string, root int, self string) []Usage {
	entries, err := os.ReadDir(proc)
	if err != nil {
		return nil
	}
	type stat struct {
		ppid int
		comm string
		cpu  time.Duration
	}
	stats := map[int]stat{}
	kids := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(proc, e.Name(), "stat"))
		if err != nil {
			continue // gone since the listing
		}
		comm, ppid, cpu, err := parseStat(b)
		if err != nil {
			continue
		}
		stats[pid] = stat{ppid, comm, cpu}
		kids[ppid] = append(kids[ppid], pid)
	}
	var out []Usage
	var walk func(pid int, role string)
	walk = func(pid int, role string) {
		s, ok := stats[pid]
		if !ok {
			return
		}
		if role == "" { // a process's children keep its role (PostgreSQL's backends)
			role = roleOf(proc, pid, s.comm)
		}
		out = append(out, Usage{PID: pid, Role: role, CPU: s.cpu})
		for _, k := range kids[pid] {
			walk(k, kidRole(role))
		}
	}
	if _, ok := stats[root]; ok {
		out = append(out, Usage{PID: root, Role: self, CPU: stats[root].cpu})
		for _, k := range kids[root] {
			walk(k, "")
		}
	}
	return out
}

// kidRole is the role a child of a process of role takes: a server's children are part of it.
func kidRole(role string) string {
	switch role {
	case "database", "redis", "sentinel":
		return role
	}
	return ""
}

// parseStat reads a process's command name, parent and CPU time (user and system) from the
// text of /proc/PID/stat. The name is in parentheses and may hold spaces and parentheses itself,
// so the fields are counted from the last ')'.
func parseStat(b []byte) (comm string, ppid int, cpu time.Duration, err error) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return "", 0, 0, fmt.Errorf("stat %q: no command name", b)
	}
	comm = string(b[open+1 : end])
	// After the name: state(3) ppid(4) ... utime(14) stime(15).
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 13 {
		return "", 0, 0, fmt.Errorf("stat %q: %d fields after the name", b, len(f))
	}
	ppid, err = strconv.Atoi(f[1])
	if err != nil {
		return "", 0, 0, fmt.Errorf("stat: ppid %q", f[1])
	}
	var ticks int64
	for _, s := range f[11:13] {
		t, err := strconv.ParseInt(s, 10, 64)
		if err != nil || t < 0 {
			return "", 0, 0, fmt.Errorf("stat: cpu ticks %q", s)
		}
		ticks += t
	}
	return comm, ppid, time.Duration(ticks) * time.Second / userHZ, nil
}

// roleOf names what the process pid (of command name comm) is to a run.
func roleOf(proc string, pid int, comm string) string {
	switch comm {
	case "redis-sentinel":
		return "sentinel"
	case "redis-server":
		if cmd, _ := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "cmdline")); bytes.Contains(cmd, []byte("--sentinel")) {
			return "sentinel"
		}
		return "redis"
	case "mariadbd", "mysqld", "postgres":
		return "database"
	}
	env, _ := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "environ"))
	for kv := range bytes.SplitSeq(env, []byte{0}) {
		if role, ok := bytes.CutPrefix(kv, []byte("SECKILL_ROLE=")); ok {
			return string(role)
		}
	}
	return comm
}
