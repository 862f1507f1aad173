package servers_test

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"seckill/internal/servers"
)

// exitTimeout is how long a process may take to exit; generous, as the machine may be busy.
const exitTimeout = 10 * time.Second

// start starts name with args as a Process and kills it when t ends.
func start(t *testing.T, name string, args ...string) *servers.Process {
	t.Helper()
	p, err := servers.Start(exec.Command(name, args...))
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(p.Kill)
	return p
}

func TestKill(t *testing.T) {
	p := start(t, "sleep", "30")
	if p.Exited() {
		t.Fatal("sleep 30 exited at once")
	}
	p.Kill()
	if !p.Exited() {
		t.Fatal("Exited() = false after Kill")
	}
	p.Kill() // a second Kill does nothing
}

func TestDoneClosesOnExit(t *testing.T) {
	p := start(t, "sh", "-c", "exit 3")
	select {
	case <-p.Done():
	case <-time.After(exitTimeout):
		t.Fatalf("Done not closed %v after sh -c 'exit 3' started", exitTimeout)
	}
	if !p.Exited() {
		t.Error("Exited() = false after Done was closed")
	}
}

func TestStop(t *testing.T) {
	p := start(t, "sleep", "30")
	p.Stop(syscall.SIGTERM, exitTimeout)
	if !p.Exited() {
		t.Fatal("Exited() = false after Stop")
	}
	var nilProcess *servers.Process
	nilProcess.Stop(syscall.SIGTERM, exitTimeout) // does nothing, as Kill does
	nilProcess.Kill()
}

func TestWaitReady(t *testing.T) {
	p := start(t, "sleep", "30")
	calls := 0
	err := p.WaitReady(exitTimeout, time.Millisecond, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("WaitReady with ready failing twice: %v after %d calls, want nil after 3", err, calls)
	}

	err = p.WaitReady(0, time.Millisecond, func() error { return errors.New("refused") })
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("WaitReady past its timeout = %v, want an error with ready's", err)
	}

	exited := start(t, "true")
	<-exited.Done()
	err = exited.WaitReady(time.Hour, time.Hour, func() error { return errors.New("refused") })
	if err == nil || !strings.Contains(err.Error(), "exited") {
		t.Errorf("WaitReady on an exited process = %v, want an error saying it exited", err)
	}
}

func TestLaunchQuotesLogWhenNotReady(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "server.log")
	cmd := exec.Command("sh", "-c", "echo bad config >&2; exit 1")
	p, err := servers.Launch(cmd, logPath, func(p *servers.Process) error {
		return p.WaitReady(exitTimeout, time.Millisecond, func() error { return errors.New("refused") })
	})
	if p != nil {
		p.Kill()
		t.Error("Launch returned a process although it did not get ready")
	}
	if err == nil || !strings.Contains(err.Error(), "exited") || !strings.HasSuffix(err.Error(), "server log ends with:\nbad config") {
		t.Errorf("Launch of a server that exits at once: got error %v, want one saying it exited, then its log", err)
	}

	p, err = servers.Launch(exec.Command("sleep", "30"), logPath, func(*servers.Process) error { return nil })
	if err != nil {
		t.Fatalf("Launch of a server ready at once: %v", err)
	}
	t.Cleanup(p.Kill)
	if p.Exited() {
		t.Error("Exited() = true for sleep 30 just launched")
	}
}

func TestTail(t *testing.T) {
	if got := servers.Tail([]byte("a\nb\n\n")); got != "a\nb" {
		t.Errorf("Tail of a short log = %q, want %q", got, "a\nb")
	}
	long := strings.Repeat("old line\n", 1000) + "last line\n"
	got := servers.Tail([]byte(long))
	if len(got) > 3<<10 || !strings.HasPrefix(got, "old line\n") || !strings.HasSuffix(got, "\nlast line") {
		t.Errorf("Tail of a %d-byte log = %d bytes %q...%q, want at most 3 KB of whole lines ending with the last",
			len(long), len(got), got[:min(len(got), 20)], got[max(0, len(got)-20):])
	}
}
