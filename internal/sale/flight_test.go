package sale

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// lostGate has lost its one activity until Warm stores it again; it counts the Warms. Its first
// answers wait until the whole crowd has asked (crowd), so that all of it meets the loss.
type lostGate struct {
	Inventory
	crowd  sync.WaitGroup
	loaded atomic.Bool
	warms  atomic.Int64
}

func (g *lostGate) Grab(_ context.Context, _ Activity, req GrabRequest) (Grab, error) {
	if !g.loaded.Load() {
		g.crowd.Done()
		g.crowd.Wait()
		return Grab{}, ErrUnloaded
	}
	return Grab{Token: "t-" + req.UserID, ActivityID: req.ActivityID, UserID: req.UserID}, nil
}

func (g *lostGate) Warm(context.Context, Activity, GateState) (bool, error) {
	g.warms.Add(1)
	time.Sleep(200 * time.Millisecond) // a rebuild takes a while: the crowd meets it running
	g.loaded.Store(true)
	return true, nil
}

type emptyQueue struct{ Backlog }

func (emptyQueue) Unacked(context.Context, Activity) ([]Grab, error) { return nil, nil }

type oneActivity struct {
	ActivityStore
	OrderStore
	a     Activity
	reads atomic.Int64
}

func (s *oneActivity) Activity(context.Context, string) (Activity, error) { return s.a, nil }
func (s *oneActivity) Unrevised(context.Context, string, int) ([]Revision, error) {
	return nil, nil // no change was made to it
}
func (s *oneActivity) GateState(context.Context, Activity, []Grab) (GateState, error) {
	s.reads.Add(1)
	return GateState{}, nil
}

// TestLostActivityIsRebuiltOnce: a crowd whose grabs all find the activity lost from the gate
// shares one rebuild, one read of the database, and every grab is then answered.
func TestLostActivityIsRebuiltOnce(t *testing.T) {
	now := time.Unix(1_000_000_000, 0)
	gate := &lostGate{}
	store := &oneActivity{a: Activity{ID: "hot", Kind: KindItem, Stock: 100, PerUserLimit: 1,
		StartAt: now.Add(-time.Hour), EndAt: now.Add(time.Hour)}}
	svc := NewService(Deps{Inventory: gate, Backlog: emptyQueue{}, Activities: store, Orders: store, Now: func() time.Time { return now }})
	var wg sync.WaitGroup
	errs := make([]error, 50)
	gate.crowd.Add(len(errs))
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = svc.Grab(context.Background(), GrabRequest{ActivityID: "hot", UserID: string(rune('a' + i))})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("grabs after the rebuild: %v", err)
	}
	if w, r := gate.warms.Load(), store.reads.Load(); w != 1 || r != 1 {
		t.Fatalf("50 grabs meeting a lost activity rebuilt it %d times reading the database %d times, want 1 and 1", w, r)
	}
}

// TestFlightWaiterLeavesOnItsContext: a caller waiting for another's call stops waiting when its
// own context ends; the call goes on for its owner.
func TestFlightWaiterLeavesOnItsContext(t *testing.T) {
	var f flights
	release := make(chan struct{})
	owner := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		owner <- f.do(context.Background(), "k", func() error { close(started); <-release; return nil })
	}()
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.do(ctx, "k", func() error { t.Error("a second call ran while the first did"); return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiter with a cancelled context: %v", err)
	}
	close(release)
	if err := <-owner; err != nil {
		t.Fatalf("the owner's call: %v", err)
	}
}
