package sale

import (
	"context"
	"errors"
	"testing"
)

// heldSoldOutGate answers every grab sold out, once the test lets it.
type heldSoldOutGate struct {
	Inventory
	asked, answer chan struct{}
}

func (g *heldSoldOutGate) Grab(context.Context, Activity, GrabRequest) (Grab, error) {
	g.asked <- struct{}{}
	<-g.answer
	return Grab{}, ErrSoldOut
}

// TestASoldOutOlderThanTheUnitsBackRaisesNoFlag: a grab asked the gate, which found no unit;
// before its answer reached the node, units came back (the operator's stock added, a restock
// announced) and the flag was lowered. The late "sold out" must not raise the flag again: it
// would turn the crowd away from the units back for a whole TTL. A sold-out answered with
// nothing back meanwhile raises it.
func TestASoldOutOlderThanTheUnitsBackRaisesNoFlag(t *testing.T) {
	store := &revisedStore{acts: map[string]Activity{"hot": {ID: "hot", Kind: KindItem, Revision: 1}}}
	gate := &heldSoldOutGate{asked: make(chan struct{}), answer: make(chan struct{})}
	svc := NewService(Deps{Inventory: gate, Activities: store})
	grab := func() chan error {
		done := make(chan error, 1)
		go func() {
			_, err := svc.Grab(context.Background(), GrabRequest{ActivityID: "hot", UserID: "u"})
			done <- err
		}()
		<-gate.asked
		return done
	}

	done := grab()
	svc.lowerSoldOut("hot") // units back while the gate's answer is on its way
	gate.answer <- struct{}{}
	if err := <-done; !errors.Is(err, ErrSoldOut) {
		t.Fatalf("grab = %v, want the gate's sold out", err)
	}
	if svc.SoldOut("hot") {
		t.Fatal("a sold-out the gate gave before the units came back raised the flag after they did")
	}

	done = grab()
	gate.answer <- struct{}{}
	if err := <-done; !errors.Is(err, ErrSoldOut) {
		t.Fatalf("grab = %v, want the gate's sold out", err)
	}
	if !svc.SoldOut("hot") {
		t.Fatal("a sold-out with nothing back meanwhile raised no flag")
	}
}
