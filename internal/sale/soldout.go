package sale

import (
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
	return ok && time.Now().UnixNano() < v.(*atomic.Int64).Load()
}

func (s *Service) flagSoldOut(activityID string, until time.Time) {
	v, ok := s.soldOut.Load(activityID)
	if !ok {
		v, _ = s.soldOut.LoadOrStore(activityID, new(atomic.Int64))
	}
	v.(*atomic.Int64).Store(until.UnixNano())
}
