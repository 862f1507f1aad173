package main

import (
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

// TestReleaseBuildLeavesTheLabOut builds the binary as a release (-tags release): it links no
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
	if out, err := exec.Command("go", "build", "-tags", "release", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags release: %v\n%s", err, out)
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
