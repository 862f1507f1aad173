package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"seckill/internal/netfault"
)

// lab are the packages that start servers and bad networks for bench's runs and the tests:
// a release build links none of them.
var lab = []string{"seckill/internal/servers", "seckill/internal/netfault", "github.com/Shopify/toxiproxy/v2"}

// TestReleaseBuildLeavesTheLabOut builds the binary as a release, with deploy/Dockerfile's own
// command (-tags release, no cgo): it is static, fit for a distroless image; it links no
// package that starts Redis, MariaDB or PostgreSQL processes or bad networks, and its bench
// refuses spawn: with a clear message. The development build links them, which shows the check
// can fail.
func TestReleaseBuildLeavesTheLabOut(t *testing.T) {
	deps := func(tags ...string) []string {
		out, err := exec.Command("go", append(append([]string{"list"}, tags...), "-deps", ".")...).CombinedOutput()
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
	bin := filepath.Join(t.TempDir(), "seckill")
	env, args := dockerBuild(t)
	for i, a := range args {
		switch {
		case i > 0 && args[i-1] == "-o":
			args[i] = bin
		case a == "./cmd/seckill":
			args[i] = "."
		}
	}
	build := exec.Command("go", args...)
	build.Env = append(os.Environ(), env...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s go %s (the Dockerfile's): %v\n%s", env, args, err, out)
	}
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
}

// TestNetemKindsAreNetfaults: bench names netfault's bad networks itself (so that a release
// build links no proxy); the names must be netfault's.
func TestNetemKindsAreNetfaults(t *testing.T) {
	if want := []string{netfault.Latency, netfault.Reset, netfault.HalfOpen}; !slices.Equal(netemKinds, want) || netemDefault != netfault.HalfOpen {
		t.Fatalf("bench's netem kinds %v (default %s), netfault's %v (HalfOpen)", netemKinds, netemDefault, want)
	}
}
