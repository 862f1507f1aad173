package main

import (
	"slices"
	"testing"

	"seckill/internal/netfault"
)

// TestNetemKindsAreNetfaults: bench names netfault's bad networks itself (so that a release
// build links no proxy); the names must be netfault's.
func TestNetemKindsAreNetfaults(t *testing.T) {
	if want := []string{netfault.Latency, netfault.Reset, netfault.HalfOpen}; !slices.Equal(netemKinds, want) || netemDefault != netfault.HalfOpen {
		t.Fatalf("bench's netem kinds %v (default %s), netfault's %v (HalfOpen)", netemKinds, netemDefault, want)
	}
}
