package sale

import (
	"sync"
	"time"
)

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
