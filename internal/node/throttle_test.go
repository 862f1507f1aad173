package node

import (
	"fmt"
	"io"
	"slices"
	"testing"
	"time"
)

// TestDrainFailuresAreThrottled: a line failing every round is reported once every period per
// activity, with the rounds that failed meanwhile.
func TestDrainFailuresAreThrottled(t *testing.T) {
	var got []string
	report := throttled(time.Hour, func(id string, err error, repeats int) {
		got = append(got, fmt.Sprintf("%s %v %d", id, err, repeats))
	})
	for range 3 {
		report("a", io.ErrUnexpectedEOF)
	}
	report("b", io.EOF)
	if want := []string{"a unexpected EOF 1", "b EOF 1"}; !slices.Equal(got, want) {
		t.Fatalf("reported %q, want %q", got, want)
	}
}
