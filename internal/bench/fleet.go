package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Fleet is the server processes bench runs itself (--spawn): nodes of the seckill binary on
// shared Redis and database servers, so that it can kill them.
type Fleet struct {
	exe    string
	env    []string
	stderr io.Writer

	mu    sync.Mutex
	nodes []*node
}

type node struct {
	role    string
	cmd     *exec.Cmd
	base    string
	metrics string        // its metrics listener's base URL
	done    chan struct{} // closed when the process has exited
}

// listenTimeout is how long a node may take to start listening.
const listenTimeout = 60 * time.Second

// How Restart starts again a node that exited before it listened.
const (
	restartPause    = 250 * time.Millisecond
	restartPatience = 2 * time.Minute
)

// StartFleet starts one node per role ("all", "api" or "worker") of the binary exe with env (the
// SECKILL_* settings they share); their logs go to stderr.
func StartFleet(ctx context.Context, exe string, env []string, roles []string, stderr io.Writer) (*Fleet, error) {
	f := &Fleet{exe: exe, env: env, stderr: stderr}
	for _, role := range roles {
		n, err := f.start(ctx, role)
		if err != nil {
			f.Stop()
			return nil, err
		}
		f.nodes = append(f.nodes, n)
	}
	return f, nil
}

// start starts a node and waits until it listens.
func (f *Fleet) start(ctx context.Context, role string) (*node, error) {
	cmd := exec.Command(f.exe, "serve")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SECKILL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, f.env...)
	// Each node on a free port of its own, its metrics too: they share this machine.
	cmd.Env = append(cmd.Env, "SECKILL_ROLE="+role, "SECKILL_ADDR=127.0.0.1:0", "SECKILL_METRICS_ADDR=127.0.0.1:0")
	cmd.Stderr = f.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", f.exe, err)
	}
	n := &node{role: role, cmd: cmd, done: make(chan struct{})}
	listening := make(chan string, 1)
	var metrics string // printed before the API's address
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "metrics: "); ok {
				metrics = strings.TrimSuffix(u, "/metrics")
			}
			if base, ok := strings.CutPrefix(sc.Text(), "seckill listening on "); ok {
				select {
				case listening <- base:
				default:
				}
			}
		}
		io.Copy(io.Discard, out)
	}()
	go func() { cmd.Wait(); close(n.done) }()
	select {
	case n.base = <-listening:
		n.metrics = metrics
		return n, nil
	case <-n.done:
		return nil, fmt.Errorf("a %s node exited before it listened: %v", role, cmd.ProcessState)
	case <-time.After(listenTimeout):
	case <-ctx.Done():
	}
	n.kill()
	return nil, fmt.Errorf("a %s node did not listen within %s", role, listenTimeout)
}

func (n *node) kill() {
	n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.done
}

// Bases are the addresses of the nodes that serve the API, and their indexes in the fleet.
func (f *Fleet) Bases() (bases []string, index []int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, n := range f.nodes {
		if n.role != "worker" {
			bases, index = append(bases, n.base), append(index, i)
		}
	}
	return bases, index
}

// Find returns the index of the first node of the role, or -1.
func (f *Fleet) Find(role string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, n := range f.nodes {
		if n.role == role {
			return i
		}
	}
	return -1
}

// KillAndRestart kills node i with SIGKILL (no shutdown, no flush), starts it again and returns
// its new address.
func (f *Fleet) KillAndRestart(ctx context.Context, i int) (string, error) {
	f.Kill(i)
	return f.Restart(ctx, i)
}

// Kill kills node i with SIGKILL (no shutdown, no flush) and returns once it has exited.
func (f *Fleet) Kill(i int) {
	f.mu.Lock()
	n := f.nodes[i]
	f.mu.Unlock()
	n.kill()
}

// Restart starts node i again, as it was started, once it has exited, and returns its new
// address. A node that exits before it listens (its database is down: it cannot migrate) is
// started again, as a supervisor would, every restartPause for up to restartPatience.
func (f *Fleet) Restart(ctx context.Context, i int) (string, error) {
	f.mu.Lock()
	old := f.nodes[i]
	f.mu.Unlock()
	<-old.done
	var n *node
	var err error
	for patience := time.Now().Add(restartPatience); ; {
		if n, err = f.start(ctx, old.role); err == nil || time.Now().After(patience) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(restartPause):
		}
	}
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	f.nodes[i] = n
	f.mu.Unlock()
	return n.base, nil
}

// Pause stops node i with SIGSTOP: it holds its connections and answers nothing. Resume
// continues it with SIGCONT.
func (f *Fleet) Pause(i int) error { return f.signal(i, syscall.SIGSTOP) }

// Resume continues node i after Pause.
func (f *Fleet) Resume(i int) error { return f.signal(i, syscall.SIGCONT) }

func (f *Fleet) signal(i int, sig syscall.Signal) error {
	f.mu.Lock()
	n := f.nodes[i]
	f.mu.Unlock()
	return n.cmd.Process.Signal(sig)
}

// labClient asks a node's lab clock: bounded, as a heal's context has no deadline of its own.
var labClient = &http.Client{Timeout: 10 * time.Second}

// Skew sets node i's clock off the machine's by d (0: back to it), through the lab clock of a
// development build's node (SECKILL_LAB_CLOCK=on): the nemesis's clock-skew strike.
func (f *Fleet) Skew(ctx context.Context, i int, d time.Duration) error {
	f.mu.Lock()
	n := f.nodes[i]
	f.mu.Unlock()
	body := fmt.Sprintf(`{"skew_ms":%d}`, d.Milliseconds())
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, n.metrics+"/lab/clock", strings.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := labClient.Do(req)
	if err != nil {
		return fmt.Errorf("skew node %d's clock: %w", i, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return fmt.Errorf("skew node %d's clock: %s: %s", i, resp.Status, msg)
	}
	return nil
}

// Indexes returns the fleet indexes of the nodes of role, in order.
func (f *Fleet) Indexes(role string) []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []int
	for i, n := range f.nodes {
		if n.role == role {
			out = append(out, i)
		}
	}
	return out
}

// Stop shuts every node down (SIGTERM, then SIGKILL after 10 s).
func (f *Fleet) Stop() {
	f.mu.Lock()
	nodes := f.nodes
	f.mu.Unlock()
	for _, n := range nodes {
		n.cmd.Process.Signal(syscall.SIGCONT) // a paused node could not hear the TERM
		n.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, n := range nodes {
		select {
		case <-n.done:
		case <-time.After(10 * time.Second):
			n.kill()
		}
	}
}
