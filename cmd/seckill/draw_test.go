package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"seckill/internal/sale"
)

// TestDrawRecomputesTheOrder: `seckill draw` prints, from a revealed seed and the entries, the
// order the draw gives (and the winners with --winners), after checking the seed against its
// commitment; a seed that does not match, or is malformed, is refused with nothing printed.
func TestDrawRecomputesTheOrder(t *testing.T) {
	seed, err := sale.NewSeed()
	if err != nil {
		t.Fatal(err)
	}
	entries := []string{"carol", "alice", "bob", "dave", "alice", "erin"}
	in := strings.Join(entries, "\n") + "\n\n"
	draw := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := drawCmd(args, strings.NewReader(in), &out, io.Discard)
		return out.String(), err
	}
	got, err := draw("--seed", seed.String(), "--commitment", strings.ToUpper(seed.Commitment()))
	if want := strings.Join(sale.DrawOrder(seed, entries), "\n") + "\n"; err != nil || got != want {
		t.Fatalf("draw = %q, %v; want %q", got, err, want)
	}
	got, err = draw("--seed", seed.String(), "--winners", "2")
	if want := strings.Join(sale.Winners(seed, entries, 2), "\n") + "\n"; err != nil || got != want {
		t.Fatalf("draw --winners 2 = %q, %v; want %q", got, err, want)
	}
	other, _ := sale.NewSeed()
	for _, bad := range [][]string{
		{"--seed", seed.String(), "--commitment", other.Commitment()},
		{"--seed", "abc"},
		{},
		{"--seed", seed.String(), "entries.txt"},
	} {
		if out, err := draw(bad...); err == nil || out != "" {
			t.Errorf("draw %q = %q, %v; want an error and nothing printed", bad, out, err)
		}
	}
}
