package risk

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"sync"
	"time"
)

// Labelled is one line of a recording, a training or an evaluation file (JSON lines): a
// request's features by name and, once it is labelled, whether it came from a bot. A node's
// recording (SECKILL_RISK_RECORD) says who made the request and what the engine decided, and
// leaves the label out: `seckill risk label` adds it from a list of the bots' accounts.
type Labelled struct {
	At       time.Time          `json:"at,omitzero"`
	Activity string             `json:"activity,omitempty"`
	User     string             `json:"user,omitempty"`
	IP       string             `json:"ip,omitempty"`
	Features map[string]float64 `json:"features"`
	Score    *float64           `json:"score,omitempty"` // the model's, when one scored
	Decision string             `json:"decision,omitempty"`
	Bot      *bool              `json:"bot,omitempty"`
}

// MaxLabelled bounds the lines one file may hold.
const MaxLabelled = 10_000_000

// ReadRecords reads a JSON-lines file of requests, checking each line's features. Errors name
// the line.
func ReadRecords(r io.Reader) ([]Labelled, error) {
	var lines []Labelled
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var l Labelled
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Features == nil {
			return nil, fmt.Errorf("line %d: want {\"features\":{...},\"bot\":true|false}: %v", n, err)
		}
		for k, v := range l.Features {
			if math.IsNaN(v) || math.IsInf(v, 0) || k == "" {
				return nil, fmt.Errorf("line %d: feature %q is not a finite number", n, k)
			}
		}
		if len(lines) == MaxLabelled {
			return nil, fmt.Errorf("line %d: more than %d lines", n, MaxLabelled)
		}
		lines = append(lines, l)
	}
	return lines, sc.Err()
}

// ReadLabelled reads a JSON-lines file of Labelled requests into rows over names, in that order;
// nil names takes every feature the file names, sorted. A line that is not one, one without its
// label, a feature that is not a finite number, or (with names given) a line without one of
// them, is an error naming the line.
func ReadLabelled(r io.Reader, names []string) ([]string, [][]float64, []bool, error) {
	lines, err := ReadRecords(r)
	if err != nil {
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
		if l.Bot == nil {
			return nil, nil, nil, fmt.Errorf("line %d: no label (\"bot\": true or false); seckill risk label adds it", i+1)
		}
		row := make([]float64, len(names))
		for j, name := range names {
			v, ok := l.Features[name]
			if !ok {
				return nil, nil, nil, fmt.Errorf("line %d: no feature %q", i+1, name)
			}
			row[j] = v
		}
		rows[i], bots[i] = row, *l.Bot
	}
	return names, rows, bots, nil
}

// Recorder writes every grab's features to a JSON-lines file, for labelling and training. Lines
// are buffered: Flush writes them out, and Close.
type Recorder struct {
	mu  sync.Mutex
	f   *os.File
	w   *bufio.Writer
	err error // the first write's failure: the recording stops there
}

// OpenRecorder appends to the file at path, creating it.
func OpenRecorder(path string) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("risk record: %w", err)
	}
	return &Recorder{f: f, w: bufio.NewWriterSize(f, 64<<10)}, nil
}

// Record writes the grab s, its features and the engine's verdict.
func (r *Recorder) Record(s Signal, v *Vector, verdict Verdict) {
	l := Labelled{At: s.At.UTC(), Activity: s.Activity, User: s.User, Features: v.Map(), Decision: verdict.Decision.String()}
	if s.IP.IsValid() {
		l.IP = s.IP.String()
	}
	if verdict.Scored {
		l.Score = &verdict.Score
	}
	b, err := json.Marshal(l)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return
	}
	if err == nil {
		_, err = r.w.Write(append(b, '\n'))
	}
	r.err = err
}

// Flush writes the buffered lines out, and returns the recording's first failure.
func (r *Recorder) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = r.w.Flush()
	}
	return r.err
}

// Close flushes and closes the file.
func (r *Recorder) Close() error {
	err := r.Flush()
	r.mu.Lock()
	defer r.mu.Unlock()
	if cerr := r.f.Close(); err == nil {
		err = cerr
	}
	return err
}
