package deploy

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// built is the binary, built once for the package's tests with the Dockerfile's own command.
var built struct {
	once sync.Once
	path string
	err  error
}

// binary is the path of the release binary, built as deploy/Dockerfile builds it.
func binary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "seckill-deploy-")
		if err != nil {
			built.err = err
			return
		}
		built.path = filepath.Join(dir, "seckill")
		env, args := dockerBuild(t)
		for i := range args {
			if i > 0 && args[i-1] == "-o" {
				args[i] = built.path
			}
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = ".." // the Dockerfile builds from the repository's root
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("%s go %s (the Dockerfile's): %v\n%s", env, args, err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.path != "" {
		os.RemoveAll(filepath.Dir(built.path))
	}
	os.Exit(code)
}

// dockerBuild is the Dockerfile's go build, as arguments to go, and its environment.
func dockerBuild(t *testing.T) (env, args []string) {
	t.Helper()
	for _, run := range dockerfile(t)["RUN"] {
		cmd, _, _ := strings.Cut(run, "&&")
		f := strings.Fields(cmd)
		for i, w := range f {
			if w == "go" && i+1 < len(f) && f[i+1] == "build" {
				return f[:i], f[i+1:]
			}
		}
	}
	t.Fatal("deploy/Dockerfile has no go build")
	return nil, nil
}

// lab are the packages that start servers and bad networks for bench's runs and the tests:
// a release build links none of them.
var lab = []string{"seckill/internal/servers", "seckill/internal/netfault", "github.com/Shopify/toxiproxy/v2"}

// TestReleaseBuildLeavesTheLabOut: the binary the Dockerfile builds (-tags release, no cgo) is
// static, fit for a distroless image; it links no package that starts Redis, MariaDB or
// PostgreSQL processes or bad networks, and its bench refuses spawn: with a clear message. The
// development build links them, which shows the check can fail.
func TestReleaseBuildLeavesTheLabOut(t *testing.T) {
	deps := func(tags ...string) []string {
		cmd := exec.Command("go", append(append([]string{"list"}, tags...), "-deps", "./cmd/seckill")...)
		cmd.Dir = ".."
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		return strings.Fields(string(out))
	}
	release, dev := deps("-tags", "release"), deps()
	for _, p := range lab {
		if slices.Contains(release, p) {
			t.Errorf("the release build links %s", p)
		}
	}
	if !slices.Contains(dev, lab[0]) {
		t.Fatalf("the development build does not link %s: the check above proves nothing", lab[0])
	}
	bin := binary(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Fatalf("the Dockerfile's build is dynamically linked (%v): a distroless static image cannot run it", p.Type)
		}
	}
	out, err := exec.Command(bin, "bench", "--redis", "spawn:cluster", "--users", "10", "--stock", "1").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "release build") {
		t.Fatalf("release bench --redis spawn:cluster: %v\n%s\nwant it refused as a release build's", err, out)
	}
	for _, lab := range []string{"SECKILL_LAB_CLOCK=on", "SECKILL_LAB_REDIS_VIA=127.0.0.1:6379=127.0.0.1:41000"} {
		cmd := exec.Command(bin, "check")
		cmd.Env = []string{"SECKILL_REDIS=redis://127.0.0.1:6379/0", lab}
		if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "release build") {
			t.Errorf("release seckill check with %s: %v\n%s\nwant it refused as a release build's", lab, err, out)
		}
	}
}

// probeTakes checks that seckill probe takes flags: run against a port nobody listens on, it
// fails to connect rather than on its flags.
func probeTakes(t *testing.T, where string, flags []string) {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"probe", "-addr", "127.0.0.1:1"}, flags...)...)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "connect") {
		t.Errorf("%s: seckill probe %q: %v %s, want it to try the node", where, flags, err, out)
	}
}

// TestCheckRefusesWhatTheBinaryDoesNotRead: seckill check, which the tests above trust, refuses a
// misspelt variable and a value serve would refuse.
func TestCheckRefusesWhatTheBinaryDoesNotRead(t *testing.T) {
	for _, env := range [][]string{{"SECKILL_RATE_USR=5"}, {"SECKILL_RATE_USER=fast"}, {"SECKILL_ROLE=api"}} {
		cmd := exec.Command(binary(t), "check")
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Errorf("seckill check with %v passed: %s", env, out)
		}
	}
}
