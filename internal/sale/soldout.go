package sale

import (
	"sync"
	"sync/atomic"
	"time"
)

// SoldOut reports whether the gate said recently that the activity has no unit left. It is a
// hint for turning the crowd away early; a false answer means "ask the gate".
//
// It is the node's one sold-out flag, in front of every gate. Two hints inside the gates are of
// another kind and stay there: the embedded gate's flag spares a sold-out crowd the activity's lock
// (it is exact, set and cleared under that lock), and redisstore's empty marks let the grabs of a
// sharded stock skip a shard for 250 ms as they fall through (shards.go).
func (s *Service) SoldOut(activityID string) bool {
	v, ok := s.soldOut.Load(activityID)
	return ok && time.Now().UnixNano() < v.(*soldOutFlag).until.Load()
}

// soldOutFlag is one activity's sold-out flag. A flag is raised on a gate's answer and lowered
// when units are back (a restock, stock added); an answer the gate gave before the units came
// back must not raise it after they did, so a raise names the lowering it was asked after.
type soldOutFlag struct {
	until   atomic.Int64  // Unix nanoseconds, real time
	lowered atomic.Uint64 // how many times it was lowered
	mu      sync.Mutex    // a raise's check and store, against a lowering; reads take no lock
}

// flagMark is what a caller saw of a flag before it asked the gate.
type flagMark struct {
	f       *soldOutFlag
	lowered uint64
}

func (s *Service) soldOutFlag(activityID string) *soldOutFlag {
	v, ok := s.soldOut.Load(activityID)
	if !ok {
		v, _ = s.soldOut.LoadOrStore(activityID, new(soldOutFlag))
	}
	return v.(*soldOutFlag)
}

// markSoldOut is taken before the gate is asked: raiseSoldOut then raises the flag only if it
// was not lowered since.
func (s *Service) markSoldOut(activityID string) flagMark {
	f := s.soldOutFlag(activityID)
	return flagMark{f: f, lowered: f.lowered.Load()}
}

// raiseSoldOut raises the flag of m for the node's sold-out TTL, unless units came back since
// m was taken: the gate's "sold out" is then older than they are.
func (s *Service) raiseSoldOut(m flagMark) {
	m.f.mu.Lock()
	defer m.f.mu.Unlock()
	if m.f.lowered.Load() == m.lowered {
		m.f.until.Store(time.Now().Add(s.soldOutTTL).UnixNano())
	}
}

// lowerSoldOut lowers activityID's flag: units are back (or an end must not hide behind it).
func (s *Service) lowerSoldOut(activityID string) {
	f := s.soldOutFlag(activityID)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lowered.Add(1)
	f.until.Store(0)
}
