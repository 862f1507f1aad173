package sale

import (
	"errors"
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
}
