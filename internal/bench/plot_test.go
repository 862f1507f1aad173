package bench

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

// TestWriteSVG: the plot is well-formed SVG with one bar per second and the fault marked.
func TestWriteSVG(t *testing.T) {
	var h []Record
	for i := range 300 { // three seconds of answers, the second one slow
		at := int64(i) * 10_000
		lat := int64(2_000)
		if at >= 1_000_000 && at < 2_000_000 {
			lat = 80_000
		}
		h = append(h, Record{User: "u", Intended: at, Start: at, End: at + lat, Outcome: SoldOut, Status: 410})
	}
	r := Result{Load: Summarize(h), Mode: "embedded", Nodes: 1, Fault: &FaultReport{Kind: "api", AtS: 1.0, RecoveryS: 0.2}}
	// 2.992 s of answers: 30 steps of 0.1 s; the slow second shows in its steps' p99
	tl := r.Timeline
	if len(r.PerSecond) != 3 || tl.StepS != 0.1 || len(tl.Answers) != 30 || tl.P99[15] < 79 || tl.P99[5] > 3 {
		t.Fatalf("per second %v, timeline %+v", r.PerSecond, tl)
	}
	var sum int64
	for _, n := range tl.Answers {
		sum += n
	}
	if sum != 300 {
		t.Fatalf("the timeline holds %d answers of 300", sum)
	}
	var buf bytes.Buffer
	if err := r.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(&buf)
	rects, lines := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			switch se.Name.Local {
			case "rect":
				rects++
			case "line":
				lines++
			}
		}
	}
	// a background, two panel frames and 30 bars; one fault marker
	if rects != 33 || lines != 1 {
		t.Fatalf("%d rects and %d lines", rects, lines)
	}
	var empty bytes.Buffer
	if err := (Result{}).WriteSVG(&empty); err != nil || !strings.HasSuffix(empty.String(), "</svg>\n") {
		t.Fatalf("empty plot: %v %q", err, empty.String())
	}
}
