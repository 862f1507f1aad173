package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"strings"

	"seckill/internal/sale"
)

// drawCmd recomputes a verifiable draw (internal/sale/draw.go) from its revealed seed and the
// published entries, one per line on stdin: what anyone can run to check a lottery's winners or
// a waiting room's order. With --commitment it first checks the seed against the commitment
// published before the entries opened.
func drawCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("draw", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seedHex := fs.String("seed", "", "the draw's revealed seed, in hex (64 digits)")
	commitment := fs.String("commitment", "", "the SHA-256 of the seed published before the draw, in hex: checked first")
	winners := fs.Int("winners", -1, "print only the first N (the units of a lottery); default: the whole order")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("draw: unexpected arguments %q (the entries come on stdin, one per line)", fs.Args())
	}
	seed, err := sale.ParseSeed(*seedHex)
	if err != nil {
		return fmt.Errorf("draw: --seed: %w", err)
	}
	if *commitment != "" && !strings.EqualFold(*commitment, seed.Commitment()) {
		return fmt.Errorf("draw: the seed does not match the commitment: its SHA-256 is %s", seed.Commitment())
	}
	var entries []string
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if e := strings.TrimSpace(sc.Text()); e != "" {
			entries = append(entries, e)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("draw: reading the entries: %w", err)
	}
	order := sale.DrawOrder(seed, entries)
	if *winners >= 0 {
		order = order[:min(*winners, len(order))]
	}
	w := bufio.NewWriter(stdout)
	for _, e := range order {
		fmt.Fprintln(w, e)
	}
	return w.Flush()
}
