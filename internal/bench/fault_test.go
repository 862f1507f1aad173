package bench

import (
	"testing"
	"time"
)

// TestFaultMeasure: the outage is the widest gap between wins from the fault on, not the time to
// the first win (a grab in flight when the fault struck may win first), and the BUSY answers are
// counted over the whole crowd.
func TestFaultMeasure(t *testing.T) {
	at := time.Unix(100, 0)
	us := func(d time.Duration) int64 { return at.Add(d).UnixMicro() }
	history := []Record{
		{Outcome: Won, Status: 202, Start: us(-time.Second), End: us(-900 * time.Millisecond)},
		{Outcome: Won, Status: 202, Start: us(-5 * time.Millisecond), End: us(2 * time.Millisecond)}, // in flight
		{Outcome: Error, Status: 503, Start: us(10 * time.Millisecond), End: us(time.Second)},
		{Outcome: Error, Status: 503, Start: us(20 * time.Millisecond), End: us(time.Second)},
		{Outcome: Won, Status: 202, Start: us(3 * time.Second), End: us(3200 * time.Millisecond)},
		{Outcome: Won, Status: 202, Start: us(3300 * time.Millisecond), End: us(3400 * time.Millisecond)},
	}
	f := FaultReport{at: at}
	f.measure(history)
	if f.OutageS == nil || *f.OutageS != 3.198 || f.Busy != 2 || f.BusyShare != 2.0/6 {
		t.Fatalf("report %+v (outage %v), want an outage of 3.198 s and 2 of 6 busy", f, f.OutageS)
	}
	f = FaultReport{at: at}
	f.measure(history[:4])
	if f.OutageS == nil || *f.OutageS != 0.998 {
		t.Fatalf("outage %v with no win after the fault but the one in flight and BUSY until 1 s; want 0.998", f.OutageS)
	}
	f = FaultReport{at: at}
	f.measure(history[:1])
	if f.OutageS != nil {
		t.Fatalf("outage %v with no win after the fault", *f.OutageS)
	}
}
