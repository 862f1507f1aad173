package servers

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// This file is the process plumbing shared by the servers: it starts a server in a process group
// of its own that dies with its parent, waits until it is ready while noticing when it exits
// instead, stops or kills it, finds binaries and free loopback ports, and quotes the end of a
// server's log in error messages. What differs from one server to another (its command line, how
// to tell it is ready) is in redis.go, mariadb.go and postgres.go.

// Process is a server process started by Start, running or exited.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
}

// Start starts cmd in a process group of its own (Setpgid), which Kill kills as a whole, and with
// Pdeathsig SIGKILL, so that it dies with the process that started it (a test process, or seckill
// bench) even if that is killed. It keeps any other attribute of cmd.SysProcAttr, such as
// Credential. A goroutine reaps the process when it exits; do not call cmd.Wait.
func Start(cmd *exec.Cmd) (*Process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Launch starts cmd as Start does, with its stdout and stderr appended to the file at logPath
// (created if need be), and calls waitReady, which should wait with WaitReady until the server is
// ready. If waitReady fails, Launch kills the process and returns waitReady's error followed by
// the last lines of the log.
func Launch(cmd *exec.Cmd, logPath string, waitReady func(*Process) error) (*Process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open server log: %w", err)
	}
	defer logFile.Close() // the child has its own copy
	cmd.Stdout, cmd.Stderr = logFile, logFile
	p, err := Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	if err := waitReady(p); err != nil {
		p.Kill()
		return nil, fmt.Errorf("%w\nserver log ends with:\n%s", err, TailFile(logPath))
	}
	return p, nil
}

// Signal sends sig to the process (SIGSTOP freezes it as a hung server would be; SIGCONT
// thaws it). It does nothing once the process has exited.
func (p *Process) Signal(sig syscall.Signal) error {
	if p == nil || p.Exited() {
		return nil
	}
	return syscall.Kill(p.cmd.Process.Pid, sig)
}

// Done returns a channel that is closed once the process has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Kill SIGKILLs the process's group, the process and any children it started, and waits for the
// process to exit. It does nothing if p is nil or has already exited (its pid may belong to
// someone else by now). The group is stopped first, so that no child is started between the
// list of children and the kill: PostgreSQL's children leave the group (setsid), and one forked
// in that moment outlived its postmaster, holding the shared memory the restart needed ("pre-
// existing shared memory block is still in use", a nemesis run).
func (p *Process) Kill() {
	if p == nil || p.Exited() {
		return
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGSTOP) // Setpgid: the group id is the pid
	kids := descendants(p.cmd.Process.Pid)
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	for _, pid := range kids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	<-p.done
	waitGone(kids)
}

// goneTimeout bounds the wait for a killed server's children to exit.
const goneTimeout = 5 * time.Second

// descendants lists the processes below pid, from /proc. A server's children may have left its
// process group (PostgreSQL's backends each start a session of their own), so killing the group
// misses them; and they hold what a restart needs (PostgreSQL's shared memory: "pre-existing
// shared memory block is still in use") until they have exited.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if parent, ok := parentOf(child); ok {
			children[parent] = append(children[parent], child)
		}
	}
	var out []int
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}

// parentOf reads a process's parent from /proc/PID/stat ("pid (comm) state ppid ...", where comm
// may itself hold spaces and parentheses).
func parentOf(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

// gone reports whether pid has exited (a zombie waiting to be reaped counts as exited).
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}

// waitGone waits until every pid has exited, at most goneTimeout.
func waitGone(pids []int) {
	deadline := time.Now().Add(goneTimeout)
	for _, pid := range pids {
		for !gone(pid) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// Stop sends sig to the process (not to its group), for a clean shutdown, and waits for it to
// exit; if it has not exited after timeout, Stop kills it as Kill does. It does nothing if p is
// nil or has already exited.
func (p *Process) Stop(sig os.Signal, timeout time.Duration) {
	if p == nil || p.Exited() {
		return
	}
	kids := descendants(p.cmd.Process.Pid)
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		waitGone(kids)
	case <-time.After(timeout):
		p.Kill()
	}
}

// WaitReady calls ready until it returns nil, every poll, and returns nil then. It gives up with
// an error when the process exits first, and with ready's last error when timeout has passed.
// WaitReady does not kill the process.
func (p *Process) WaitReady(timeout, poll time.Duration, ready func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %w", timeout, err)
		}
		select {
		case <-p.done:
			return errors.New("server exited during startup")
		case <-time.After(poll):
		}
	}
}

// FindBinary returns the path of a binary: path if it exists, else name looked up in PATH.
func FindBinary(name, path string) (string, error) {
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	found, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s is not installed (not at %s nor in PATH)", name, path)
	}
	return found, nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// TailFile returns the last lines of the file at path, as Tail does, or why it cannot be read.
func TailFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	return Tail(b)
}

// Tail returns about the last 3 KB of b, starting at a line, without trailing newlines.
func Tail(b []byte) string {
	const keep = 3 << 10
	if len(b) > keep {
		b = b[len(b)-keep:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return strings.TrimRight(string(b), "\n")
}
