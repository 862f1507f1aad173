package embedded

import (
	"context"
	"sync"
	"time"

	"seckill/internal/sale"
)

var _ sale.ChallengeStore = (*Challenges)(nil)

// Challenges keeps the challenges handed out by this process. They are not worth a disk write:
// after a restart a user simply asks for a new one.
type Challenges struct {
	mu    sync.Mutex
	byID  map[string]kept
	puts  int // since expired challenges were last swept
	limit int // most challenges kept at once
}

type kept struct {
	c       sale.Challenge
	expires time.Time
}

// NewChallenges returns an empty store that keeps at most limit challenges at once; beyond it
// Put answers ErrBusy rather than let a flood of requests eat the memory.
func NewChallenges(limit int) *Challenges {
	return &Challenges{byID: map[string]kept{}, limit: limit}
}

// Put implements sale.ChallengeStore.
func (s *Challenges) Put(ctx context.Context, c sale.Challenge, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.puts++; s.puts >= 1024 {
		s.puts = 0
		for id, k := range s.byID {
			if !c.IssuedAt.Before(k.expires) {
				delete(s.byID, id)
			}
		}
	}
	if len(s.byID) >= s.limit {
		return sale.ErrBusy
	}
	s.byID[c.ID] = kept{c: c, expires: c.IssuedAt.Add(ttl)}
	return nil
}

// Take implements sale.ChallengeStore.
func (s *Challenges) Take(ctx context.Context, id string) (sale.Challenge, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.byID[id]
	if !ok {
		return sale.Challenge{}, sale.ErrNotFound
	}
	delete(s.byID, id)
	return k.c, nil
}
