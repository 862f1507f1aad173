package sale

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
)

// CreateActivity validates a, gives it an id if it has none, stores it (splitting a red packet
// into its shares first) and opens it in the gate. Errors: ErrInvalid, ErrExists.
func (s *Service) CreateActivity(ctx context.Context, a Activity) (Activity, error) {
	if a.ID == "" {
		a.ID = NewToken("a")[:13]
	}
	if a.PerUserLimit == 0 {
		a.PerUserLimit = 1
	}
	if a.Admission == "" {
		a.Admission = AdmitDirect
	}
	if a.StockShards == 0 {
		a.StockShards = 1
	}
	if a.Lined() {
		if a.QueueCap == 0 {
			a.QueueCap = min(DefaultQueueFactor*a.Stock, MaxQueueCap)
		}
		if a.AdmitRate == 0 {
			a.AdmitRate = DefaultAdmitRate
		}
		if a.Seed == (Seed{}) {
			seed, err := NewSeed()
			if err != nil {
				return Activity{}, err
			}
			a.Seed = seed
		}
		if s.line == nil {
			return Activity{}, fmt.Errorf("%w: admission %q needs a line, and this node has none", ErrInvalid, a.Admission)
		}
	}
	a.Revision = 1
	a.CreatedAt = s.now().UTC().Truncate(time.Millisecond)
	a.StartAt = a.StartAt.UTC().Truncate(time.Millisecond)
	a.EndAt = a.EndAt.UTC().Truncate(time.Millisecond)
	if err := a.Validate(); err != nil {
		return Activity{}, err
	}
	var shares []int64
	st := GateState{}
	if a.Kind == KindRedPacket {
		var err error
		if shares, err = SplitRedPacket(a.TotalCents, a.Stock, rand.Int64N); err != nil {
			return Activity{}, err
		}
		st.Shares = make([]Share, len(shares))
		for i, c := range shares {
			st.Shares[i] = Share{Index: int64(i), AmountCents: c}
		}
	}
	if err := s.activities.CreateActivity(ctx, a, shares); err != nil {
		return Activity{}, fmt.Errorf("create activity %s: %w", a.ID, err)
	}
	s.remember(a)
	if err := s.inventory.Load(ctx, a, st); err != nil {
		return Activity{}, fmt.Errorf("open activity %s in the gate: %w", a.ID, err)
	}
	if err := s.loadRanking(ctx, a, st, nil); err != nil {
		return Activity{}, fmt.Errorf("open the leaderboard of %s: %w", a.ID, err)
	}
	return a, nil
}

// Activity returns an activity from the node's cache, or from the database. An id the database
// does not have is remembered for MissTTL: a crowd grabbing ids that do not exist costs a query
// per id, not per request. Errors: ErrNotFound, ErrBusy.
func (s *Service) Activity(ctx context.Context, id string) (Activity, error) {
	if a, ok := s.Known(id); ok {
		return a, nil
	}
	if !ValidID(id) {
		return Activity{}, ErrNotFound
	}
	if s.misses.known(id, time.Now()) {
		return Activity{}, fmt.Errorf("activity %s: %w", id, ErrNotFound)
	}
	a, err := s.activities.Activity(ctx, id)
	switch {
	case err == nil:
		s.remember(a)
	case errors.Is(err, ErrNotFound):
		s.misses.add(id, time.Now())
	}
	return a, err
}

// remember caches a on this node, unless it holds a later revision already: reads of the
// database that race (a rebuild's, a refresh's) never take a node's copy back.
func (s *Service) remember(a Activity) {
	for {
		old, loaded := s.acts.LoadOrStore(a.ID, a)
		if !loaded || old.(Activity).Revision > a.Revision || s.acts.CompareAndSwap(a.ID, old, a) {
			break
		}
	}
	s.misses.forget(a.ID)
}

// Known returns an activity this node has read already, without asking the database: the edge
// uses it to apply an activity's own rate limits without a query per request.
func (s *Service) Known(id string) (Activity, bool) {
	v, ok := s.acts.Load(id)
	if !ok {
		return Activity{}, false
	}
	return v.(Activity), true
}

// Current returns the activities this node knows that have not ended, soonest start first: what
// the front page lists. It reads the node's cache (reloaded with ReloadActivities), never the
// database, so a crowd on the front page costs no queries.
func (s *Service) Current() []Activity {
	now := s.now()
	var out []Activity
	s.acts.Range(func(_, v any) bool {
		if a := v.(Activity); now.Before(a.EndAt) {
			out = append(out, a)
		}
		return true
	})
	slices.SortFunc(out, func(a, b Activity) int {
		if c := a.StartAt.Compare(b.StartAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// ReloadActivities reads the activities that have not ended into the node's cache, so that one
// created through another node is Known here within a reload, and drops from it those that ended
// more than MaxPayWindow and a week ago.
func (s *Service) ReloadActivities(ctx context.Context) error {
	acts, err := s.activities.Activities(ctx, s.now())
	if err != nil {
		return fmt.Errorf("reload activities: %w", err)
	}
	for _, a := range acts {
		s.remember(a)
	}
	// What the node cached of activities long over goes: a shop that runs a sale a day keeps
	// two weeks of them, not every one it ever served.
	old := s.now().Add(-MaxPayWindow - archiveBacklog)
	s.acts.Range(func(k, v any) bool {
		if v.(Activity).EndAt.Before(old) {
			s.acts.Delete(k)
			s.soldOut.Delete(k)
			s.entries.Delete(k)
		}
		return true
	})
	return nil
}

// misses remembers, for a moment, the activity ids the database said it does not have: a crowd
// asking for an id that does not exist (a stale link, a scanner) costs one query per id per
// MissTTL, not one per request. It holds at most max ids; when it is full, the ids past their
// time are dropped, and if none is, all are (a flood of made-up ids never grows it).
type misses struct {
	mu    sync.Mutex
	until map[string]time.Time // id -> when its miss is forgotten (real time)
	max   int
}

// MissTTL is how long a node trusts the database's "no such activity": an activity created on
// another node meanwhile is found at most this long after a miss (the node that created it
// knows it at once).
const MissTTL = time.Second

// maxMisses bounds the remembered misses of a node.
const maxMisses = 10_000

func newMisses(max int) *misses { return &misses{until: map[string]time.Time{}, max: max} }

// known reports whether id was missed less than MissTTL ago.
func (m *misses) known(id string, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.until[id]
	if ok && !now.Before(t) {
		delete(m.until, id)
		return false
	}
	return ok
}

// add remembers a miss of id at now.
func (m *misses) add(id string, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.until) >= m.max {
		for k, t := range m.until {
			if !now.Before(t) {
				delete(m.until, k)
			}
		}
		if len(m.until) >= m.max {
			clear(m.until)
		}
	}
	m.until[id] = now.Add(MissTTL)
}

// forget drops a remembered miss of id: the activity exists now.
func (m *misses) forget(id string) {
	m.mu.Lock()
	delete(m.until, id)
	m.mu.Unlock()
}

// size is how many misses are remembered.
func (m *misses) size() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.until)
}
