package sale

import (
	"errors"
	"fmt"
	"io"
	"testing"
)

func TestBusyKeepsBothErrorsInTheChain(t *testing.T) {
	err := Busy(io.ErrUnexpectedEOF, "load activity %s into redis", "a1")
	if !errors.Is(err, ErrBusy) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("Busy(...) = %v: want both ErrBusy and the cause in its chain", err)
	}
	if IsVerdict(err) {
		t.Fatalf("IsVerdict(%v) = true: a backend's failure is not an answer", err)
	}
	want := ErrBusy.Error() + ": load activity a1 into redis: " + io.ErrUnexpectedEOF.Error()
	if err.Error() != want {
		t.Fatalf("Busy(...) = %q, want %q", err, want)
	}
	if got := Busy(io.EOF, "100% sure").Error(); got != ErrBusy.Error()+": 100% sure: EOF" {
		t.Fatalf("Busy without arguments formatted its text: %q", got)
	}
	// A backend's error that is busy already is said busy once, and stays in the chain.
	inner := fmt.Errorf("%w: %w: 0 of 1 replicas", ErrBusy, io.ErrShortWrite)
	err = Busy(inner, "grab on redis")
	if want := ErrBusy.Error() + ": grab on redis: " + io.ErrShortWrite.Error() + ": 0 of 1 replicas"; err.Error() != want {
		t.Fatalf("Busy(busy) = %q, want %q", err, want)
	}
	if !errors.Is(err, io.ErrShortWrite) || !errors.Is(err, ErrBusy) {
		t.Fatalf("Busy(busy) = %v: lost its chain", err)
	}
}
