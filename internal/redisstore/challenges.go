package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/sale"
)

var _ sale.ChallengeStore = (*Challenges)(nil)

// Challenges keeps the challenges handed out by every node in Redis, so a user may ask one node
// and answer another. Each is one key with the challenge's lifetime; GETDEL makes every challenge
// answerable once.
type Challenges struct{ rdb redis.UniversalClient }

// NewChallenges returns a challenge store on rdb.
func NewChallenges(rdb redis.UniversalClient) *Challenges { return &Challenges{rdb: rdb} }

// Put implements sale.ChallengeStore.
func (s *Challenges) Put(ctx context.Context, c sale.Challenge, ttl time.Duration) error {
	v := c.ActivityID + "\n" + c.UserID + "\n" + strconv.FormatInt(c.Answer, 10) + "\n" +
		strconv.FormatInt(c.IssuedAt.UnixMilli(), 10)
	if err := s.rdb.Set(ctx, challengeKey(c.ID), v, ttl).Err(); err != nil {
		return sale.Busy(err, "store a challenge on redis")
	}
	return nil
}

// Take implements sale.ChallengeStore.
func (s *Challenges) Take(ctx context.Context, id string) (sale.Challenge, error) {
	v, err := s.rdb.GetDel(ctx, challengeKey(id)).Result()
	if errors.Is(err, redis.Nil) {
		return sale.Challenge{}, sale.ErrNotFound
	}
	if err != nil {
		return sale.Challenge{}, sale.Busy(err, "take a challenge on redis")
	}
	f := strings.Split(v, "\n")
	if len(f) != 4 {
		return sale.Challenge{}, fmt.Errorf("challenge %s: malformed record %q", id, v)
	}
	answer, err1 := strconv.ParseInt(f[2], 10, 64)
	issued, err2 := strconv.ParseInt(f[3], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return sale.Challenge{}, fmt.Errorf("challenge %s: malformed record %q: %w", id, v, err)
	}
	return sale.Challenge{ID: id, ActivityID: f[0], UserID: f[1], Answer: answer, IssuedAt: time.UnixMilli(issued).UTC()}, nil
}
