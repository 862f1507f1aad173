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
