package sale

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// revisedStore keeps activities and the revisions the gate is owed, in memory.
type revisedStore struct {
	ActivityStore
	mu    sync.Mutex
	acts  map[string]Activity
	owed  []Revision
	reads atomic.Int64
}

func (s *revisedStore) Activity(_ context.Context, id string) (Activity, error) {
	s.reads.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.acts[id]
	if !ok {
		return Activity{}, ErrNotFound
	}
	return a, nil
}

func (s *revisedStore) Unrevised(_ context.Context, id string, limit int) ([]Revision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Revision
	for _, r := range s.owed {
		if (id == "" || r.ActivityID == id) && len(out) < limit {
			out = append(out, r)
		}
	}
	return out, nil
}

func (s *revisedStore) Revised(_ context.Context, id string, rev int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.owed = slices.DeleteFunc(s.owed, func(r Revision) bool { return r.ActivityID == id && r.Revision == rev })
	return nil
}

// revisionGate holds a revision per activity and refuses grabs on another, as the gates do; it
// fails every revision of the activities in down.
type revisionGate struct {
	Inventory
	mu    sync.Mutex
	held  map[string]int64
	down  map[string]bool
	given []string // "id@revision", in the order given
	grabs atomic.Int64
}

func (g *revisionGate) Revise(_ context.Context, a Activity, _ int64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch cur := g.held[a.ID]; {
	case g.down[a.ID]:
		return fmt.Errorf("%w: the test's gate of %s is away", ErrBusy, a.ID)
	case cur >= a.Revision:
		return nil
	case cur != a.Revision-1:
		return fmt.Errorf("%s at %d, given %d: %w", a.ID, cur, a.Revision, ErrChanged)
	}
	g.held[a.ID] = a.Revision
	g.given = append(g.given, fmt.Sprint(a.ID, "@", a.Revision))
	return nil
}

func (g *revisionGate) Grab(_ context.Context, a Activity, r GrabRequest) (Grab, error) {
	g.grabs.Add(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held[a.ID] != a.Revision {
		return Grab{}, ErrStale
	}
	return Grab{Token: "t-" + r.UserID, ActivityID: a.ID, UserID: r.UserID}, nil
}

func revisionService(store *revisedStore, gate *revisionGate) *Service {
	now := time.Unix(1_000_000_000, 0)
	return NewService(Deps{Inventory: gate, Activities: store, Now: func() time.Time { return now }})
}

// TestOwedRevisionsInTheirOrderPerActivity: the revisions owed come back from the database in
// any order (the nodes that made them disagree on the time); each activity's are given in the
// order of their numbers, and one the gate cannot take holds back only the later ones of its own
// activity.
func TestOwedRevisionsInTheirOrderPerActivity(t *testing.T) {
	store := &revisedStore{acts: map[string]Activity{"a": {ID: "a", Revision: 3}, "b": {ID: "b", Revision: 3}, "c": {ID: "c", Revision: 2}},
		owed: []Revision{{ActivityID: "b", Revision: 3}, {ActivityID: "a", Revision: 3}, {ActivityID: "a", Revision: 2},
			{ActivityID: "c", Revision: 2}, {ActivityID: "b", Revision: 2}}}
	gate := &revisionGate{held: map[string]int64{"a": 1, "b": 1, "c": 1}, down: map[string]bool{"a": true}}
	svc := revisionService(store, gate)
	n, err := svc.ReviseOwed(context.Background(), 10)
	if n != 3 || err == nil {
		t.Fatalf("ReviseOwed = %d, %v; want b's two and c's given, a's refused", n, err)
	}
	if want := []string{"b@2", "b@3", "c@2"}; !slices.Equal(gate.given, want) {
		t.Fatalf("given %v, want %v", gate.given, want)
	}
	if owed, _ := store.Unrevised(context.Background(), "", 10); len(owed) != 2 || owed[0].ActivityID != "a" || owed[1].ActivityID != "a" {
		t.Fatalf("owed after: %+v; want a's two, nothing else", owed)
	}
	gate.down["a"] = false
	if n, err := svc.ReviseOwed(context.Background(), 10); n != 2 || err != nil {
		t.Fatalf("ReviseOwed once a's gate is back = %d, %v", n, err)
	}
	if want := []string{"b@2", "b@3", "c@2", "a@2", "a@3"}; !slices.Equal(gate.given, want) {
		t.Fatalf("given %v, want %v", gate.given, want)
	}
}

// TestAbsentGateLeavesTheRevisionOwed: a gate that does not hold the activity (a cache that lost
// it) has not been given the revision: it stays owed, for the rebuild to give.
func TestAbsentGateLeavesTheRevisionOwed(t *testing.T) {
	for _, absent := range []error{ErrUnloaded, ErrNotFound} {
		store := &revisedStore{acts: map[string]Activity{"a": {ID: "a", Revision: 2}}, owed: []Revision{{ActivityID: "a", Revision: 2}}}
		gate := &lostRevisionGate{err: absent}
		svc := NewService(Deps{Inventory: gate, Activities: store})
		if n, err := svc.ReviseOwed(context.Background(), 10); n != 0 || !errors.Is(err, absent) {
			t.Fatalf("ReviseOwed on a gate answering %v = %d, %v", absent, n, err)
		}
		if owed, _ := store.Unrevised(context.Background(), "a", 10); len(owed) != 1 {
			t.Fatalf("owed after a gate answered %v: %+v; want the revision still owed", absent, owed)
		}
	}
}

type lostRevisionGate struct {
	Inventory
	err error
}

func (g *lostRevisionGate) Revise(context.Context, Activity, int64) error { return g.err }

// TestStaleCrowdRefreshesOnce: the activity changed on another node; a crowd on this node, whose
// copy is the old one, meets the gate's ErrStale all at once. One read of the database answers
// them all, and every grab is then made on the new revision within its request.
func TestStaleCrowdRefreshesOnce(t *testing.T) {
	store := &revisedStore{acts: map[string]Activity{"hot": {ID: "hot", Kind: KindItem, Revision: 1}}}
	gate := &revisionGate{held: map[string]int64{"hot": 1}}
	svc := revisionService(store, gate)
	if _, err := svc.Activity(context.Background(), "hot"); err != nil { // the node's copy, revision 1
		t.Fatal(err)
	}
	store.mu.Lock()
	store.acts["hot"] = Activity{ID: "hot", Kind: KindItem, Revision: 2, Name: "renamed"}
	store.mu.Unlock()
	gate.mu.Lock()
	gate.held["hot"] = 2
	gate.mu.Unlock()
	store.reads.Store(0)

	errs := make([]error, 200)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = svc.Grab(context.Background(), GrabRequest{ActivityID: "hot", UserID: fmt.Sprint("u", i)})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("grabs on the old copy: %v", err)
	}
	if r := store.reads.Load(); r > 3 {
		t.Fatalf("200 grabs meeting a stale copy read the activity %d times; want it read once per refresh (a handful)", r)
	}
	if a, _ := svc.Known("hot"); a.Revision != 2 {
		t.Fatalf("the node's copy after: revision %d, want 2", a.Revision)
	}
	if g := gate.grabs.Load(); g > 400 {
		t.Fatalf("%d gate calls for 200 grabs; want at most two each", g)
	}
}

// owedRestocks keeps cancelled orders whose units the gate is owed.
type owedRestocks struct {
	OrderStore
	mu       sync.Mutex
	owed     []Order
	released []string
}

func (s *owedRestocks) Unreleased(context.Context, int) ([]Order, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.owed), nil
}

func (s *owedRestocks) Released(_ context.Context, token string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.owed = slices.DeleteFunc(s.owed, func(o Order) bool { return o.Token == token })
	s.released = append(s.released, token)
	return nil
}

// releaseGate refuses the releases of the activities in down.
type releaseGate struct {
	Inventory
	down map[string]bool
}

func (g releaseGate) Release(_ context.Context, a Activity, _ Grab) error {
	if g.down[a.ID] {
		return fmt.Errorf("%w: the test's gate of %s is away", ErrBusy, a.ID)
	}
	return nil
}

// TestOwedRestocksOfOneActivityHoldBackOnlyIt: the gate of one activity is away; the units owed
// to the others are given back still, and its own stay owed.
func TestOwedRestocksOfOneActivityHoldBackOnlyIt(t *testing.T) {
	acts := &revisedStore{acts: map[string]Activity{"a": {ID: "a", Kind: KindItem}, "b": {ID: "b", Kind: KindItem}}}
	orders := &owedRestocks{owed: []Order{{Token: "a1", ActivityID: "a"}, {Token: "b1", ActivityID: "b"}, {Token: "a2", ActivityID: "a"},
		{Token: "b2", ActivityID: "b"}}}
	svc := NewService(Deps{Inventory: releaseGate{down: map[string]bool{"a": true}}, Activities: acts, Orders: orders})
	n, err := svc.ReleaseOwed(context.Background(), 10)
	if n != 2 || err == nil {
		t.Fatalf("ReleaseOwed = %d, %v; want b's two given back, a's refused", n, err)
	}
	if !slices.Equal(orders.released, []string{"b1", "b2"}) || len(orders.owed) != 2 {
		t.Fatalf("released %v, still owed %+v", orders.released, orders.owed)
	}
}
