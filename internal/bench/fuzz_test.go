package bench

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzReadHistory: any input either fails with an error naming its line or parses into records
// that survive a write and a read unchanged.
func FuzzReadHistory(f *testing.F) {
	f.Add(`{"user":"u1","intended_us":1,"start_us":2,"end_us":3,"outcome":"won","status":202,"order_token":"t","node":0}` + "\n")
	f.Add(`{"user":"u2","outcome":"error","status":0,"err":"refused","not_sent":true}` + "\n\n")
	f.Add("not json\n")
	f.Add(`{"user":1}`)
	f.Add(`{"op":"machine","start_us":1,"end_us":2,"machine":{"busy_pct":80,"iowait_pct":1,"steal_pct":19.5,"late_ms":3}}` + "\n")
	f.Fuzz(func(t *testing.T, in string) {
		got, err := ReadHistory(strings.NewReader(in))
		if err != nil {
			if !strings.Contains(err.Error(), "line") && !strings.Contains(err.Error(), "token too long") {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		var buf bytes.Buffer
		if err := WriteHistory(&buf, got); err != nil {
			t.Fatal(err)
		}
		again, err := ReadHistory(&buf)
		if err != nil {
			t.Fatalf("reading back what was written: %v", err)
		}
		if diff := cmp.Diff(got, again); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}

// FuzzParseCPUTimes: /proc/stat's cpu line either parses into times whose parts fit in their
// total, or fails with an error naming the file.
func FuzzParseCPUTimes(f *testing.F) {
	f.Add("cpu  4705 356 584 3699176 23060 0 1277 310 0 0")
	f.Add("cpu0 1 2 3 4 5 6 7 8")
	f.Add("cpu 1 2 3")
	f.Add("cpu 18446744073709551615 1 0 0 0 0 0 0")
	f.Fuzz(func(t *testing.T, line string) {
		c, err := parseCPUTimes(line)
		if err != nil {
			if !strings.Contains(err.Error(), "/proc/stat") {
				t.Fatalf("error without the file: %v", err)
			}
			return
		}
		if c.busy+c.iowait+c.steal > c.total {
			t.Fatalf("%q: %+v, parts beyond the total", line, c)
		}
	})
}
