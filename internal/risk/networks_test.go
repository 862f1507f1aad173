package risk

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestNetworks(t *testing.T) {
	example, err := os.ReadFile("../../deploy/risk/networks.example.txt")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "networks.txt")
	if err := os.WriteFile(path, example, 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := LoadNetworks(path)
	if err != nil {
		t.Fatalf("the shipped example: %v", err)
	}
	if n.Len() != 4 {
		t.Fatalf("the example lists %d networks, want 4", n.Len())
	}
	for addr, want := range map[string]bool{
		"192.0.2.1": true, "192.0.2.255": true, "192.0.3.0": false, "198.51.100.9": true, "203.0.113.7": true,
		"203.0.113.8": false, "2001:db8::1": true, "2001:db9::1": false, "::ffff:192.0.2.9": true, "10.0.0.1": false,
	} {
		if got := n.Contains(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Contains(%s) = %v, want %v", addr, got, want)
		}
	}

	// Nested networks (the inner ones listed first, many of them): an address of the outer one
	// after them all is not missed.
	var inner strings.Builder
	for i := range 200 {
		inner.WriteString(netip.AddrFrom4([4]byte{10, byte(i), 0, 0}).String() + "/16\n")
	}
	nested, err := ParseNetworks([]byte(inner.String() + "10.0.0.0/8\n"))
	if err != nil {
		t.Fatal(err)
	}
	nn := &Networks{prefixes: nested}
	if len(nested) != 1 || !nn.Contains(netip.MustParseAddr("10.250.0.1")) || !nn.Contains(netip.MustParseAddr("10.1.2.3")) {
		t.Errorf("nested networks %v: an address of the outer one missed", len(nested))
	}

	// A change is read again; a broken file keeps the list and says why.
	if changed, err := n.Reload(); changed || err != nil {
		t.Fatalf("an unchanged file: %v, %v", changed, err)
	}
	later := time.Now().Add(time.Second)
	if err := os.WriteFile(path, []byte("100.64.0.0/10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(path, later, later)
	if changed, err := n.Reload(); !changed || err != nil || !n.Contains(netip.MustParseAddr("100.64.1.1")) || n.Contains(netip.MustParseAddr("192.0.2.1")) {
		t.Fatalf("a changed file: %v, %v", changed, err)
	}
	if err := os.WriteFile(path, []byte("100.64.0.0/10\nnot a network\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(path, later.Add(time.Second), later.Add(time.Second))
	if _, err := n.Reload(); err == nil || !strings.Contains(err.Error(), "line 2") || n.Err() == nil || !n.Contains(netip.MustParseAddr("100.64.1.1")) {
		t.Fatalf("a broken file: %v; want line 2 named and the old list kept", err)
	}
	if _, err := LoadNetworks(filepath.Join(t.TempDir(), "nope")); err == nil {
		t.Error("a missing file loaded")
	}
}

func FuzzParseNetworks(f *testing.F) {
	f.Add("192.0.2.0/24\n# c\n2001:db8::/32\n")
	f.Add("1.2.3.4\n::1\n")
	f.Add("300.0.0.0/8")
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := ParseNetworks([]byte(s))
		if err != nil {
			return
		}
		n := &Networks{prefixes: ps}
		for i, p := range ps {
			if !n.Contains(p.Addr()) {
				t.Fatalf("%s listed but its first address is not contained", p)
			}
			if i > 0 && ps[i-1].Overlaps(p) {
				t.Fatalf("%s and %s overlap: the list must be disjoint", ps[i-1], p)
			}
		}
	})
}

func BenchmarkNetworksContains(b *testing.B) {
	var lines []string
	for i := range 10_000 {
		lines = append(lines, netip.AddrFrom4([4]byte{byte(i >> 8), byte(i), 0, 0}).String()+"/24")
	}
	ps, err := ParseNetworks([]byte(strings.Join(lines, "\n")))
	if err != nil {
		b.Fatal(err)
	}
	n := &Networks{prefixes: ps}
	a := netip.MustParseAddr("20.30.0.9")
	for b.Loop() {
		n.Contains(a)
	}
}
