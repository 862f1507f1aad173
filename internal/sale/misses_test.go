package sale

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// countingStore answers Activity from one activity it may be given later, counting the calls;
// the service under test calls nothing else of it.
type countingStore struct {
	ActivityStore
	calls atomic.Int64
	has   atomic.Pointer[Activity]
}

func (s *countingStore) Activity(_ context.Context, id string) (Activity, error) {
	s.calls.Add(1)
	if a := s.has.Load(); a != nil && a.ID == id {
		return *a, nil
	}
	return Activity{}, fmt.Errorf("activity %s: %w", id, ErrNotFound)
}

// TestUnknownIDsCostOneQueryEach: a crowd grabbing an id that does not exist asks the database
// once per MissTTL, not once per grab; an activity created by another node meanwhile is found
// once the miss is forgotten.
func TestUnknownIDsCostOneQueryEach(t *testing.T) {
	store := &countingStore{}
	svc := NewService(Deps{Activities: store})
	ctx := context.Background()
	for range 100 {
		if _, err := svc.Grab(ctx, GrabRequest{ActivityID: "nope", UserID: "u"}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("grab of an unknown id: %v, want ErrNotFound", err)
		}
	}
	if n := store.calls.Load(); n != 1 {
		t.Fatalf("100 grabs of one unknown id asked the database %d times, want 1", n)
	}
	store.has.Store(&Activity{ID: "nope", Name: "created elsewhere"})
	if _, err := svc.Activity(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("within MissTTL of the miss: %v, want the remembered ErrNotFound", err)
	}
	time.Sleep(MissTTL)
	if a, err := svc.Activity(ctx, "nope"); err != nil || a.Name != "created elsewhere" {
		t.Fatalf("after MissTTL: %+v, %v; want the activity created elsewhere", a, err)
	}
	if n := store.calls.Load(); n != 2 {
		t.Fatalf("the database was asked %d times, want 2", n)
	}
}

// TestMissesStayBounded: a flood of made-up ids never grows the misses past their bound, and a
// miss is forgotten at its time, by the clock the caller gives.
func TestMissesStayBounded(t *testing.T) {
	now := time.Unix(1_000_000_000, 0)
	m := newMisses(100)
	for i := range 10_000 {
		m.add(fmt.Sprint("id", i), now)
		if n := m.size(); n > 100 {
			t.Fatalf("%d misses remembered after %d ids, bound 100", n, i+1)
		}
	}
	m.add("x", now)
	if !m.known("x", now.Add(MissTTL-time.Nanosecond)) {
		t.Fatal("a miss forgotten before its time")
	}
	if m.known("x", now.Add(MissTTL)) {
		t.Fatal("a miss remembered past its time")
	}
	m.add("y", now)
	m.forget("y")
	if m.known("y", now) {
		t.Fatal("a forgotten miss is still known")
	}
}
