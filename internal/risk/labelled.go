package risk

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
)

// Labelled is one line of a training or evaluation file (JSON lines): a request's features by
// name, and whether it came from a bot.
type Labelled struct {
	Features map[string]float64 `json:"features"`
	Bot      bool               `json:"bot"`
}

// MaxLabelled bounds the lines one file may hold.
const MaxLabelled = 10_000_000

// ReadLabelled reads a JSON-lines file of Labelled requests into rows over names, in that order;
// nil names takes every feature the file names, sorted. A line that is not one, a feature that
// is not a finite number, or (with names given) a line without one of them, is an error naming
// the line.
func ReadLabelled(r io.Reader, names []string) ([]string, [][]float64, []bool, error) {
	var lines []Labelled
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var l Labelled
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Features == nil {
			return nil, nil, nil, fmt.Errorf("line %d: want {\"features\":{...},\"bot\":true|false}: %v", n, err)
		}
		for k, v := range l.Features {
			if math.IsNaN(v) || math.IsInf(v, 0) || k == "" {
				return nil, nil, nil, fmt.Errorf("line %d: feature %q is not a finite number", n, k)
			}
		}
		if len(lines) == MaxLabelled {
			return nil, nil, nil, fmt.Errorf("line %d: more than %d lines", n, MaxLabelled)
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, nil, err
	}
	if names == nil {
		seen := map[string]bool{}
		for _, l := range lines {
			for k := range l.Features {
				seen[k] = true
			}
		}
		names = slices.Sorted(maps.Keys(seen))
	}
	rows, bots := make([][]float64, len(lines)), make([]bool, len(lines))
	for i, l := range lines {
		row := make([]float64, len(names))
		for j, name := range names {
			v, ok := l.Features[name]
			if !ok {
				return nil, nil, nil, fmt.Errorf("line %d: no feature %q", i+1, name)
			}
			row[j] = v
		}
		rows[i], bots[i] = row, l.Bot
	}
	return names, rows, bots, nil
}
