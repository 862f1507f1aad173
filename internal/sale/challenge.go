package sale

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// The anti-bot challenge. A user asks for a challenge (an arithmetic question the HTTP layer
// renders as an image), answers it once, and a right answer given after the start earns a pass:
// a one-time path token bound to the user and the activity. The grab carries the pass and the
// gate consumes it in the same atomic step that takes the unit, so a pass can be neither replayed
// nor handed to another user nor spent on another activity.

// Challenge and pass lifetimes.
const (
	ChallengeTTL = 2 * time.Minute  // a question unanswered for this long is forgotten
	PassTTL      = 30 * time.Second // a pass unspent for this long expires
)

// Challenge is one question put to one user for one activity. Its answer never leaves the
// server.
type Challenge struct {
	ID         string
	ActivityID string
	UserID     string
	Question   string // "7 + 5 = ?"
	Answer     int64
	IssuedAt   time.Time
}

// Pass is the reward of a right answer: the grab path's one-time token.
type Pass struct {
	Token     string
	ExpiresAt time.Time
	// Solve is how long the user took to answer, for risk scoring.
	Solve time.Duration
}

// MaxChallengeIDLen bounds a challenge id from a client.
const MaxChallengeIDLen = 40

// NewQuestion draws an arithmetic question and its answer: a sum or a difference of two numbers
// below 50, never negative.
func NewQuestion() (string, int64) {
	a, b := rand.Int64N(49)+1, rand.Int64N(49)+1
	if rand.IntN(2) == 0 {
		return fmt.Sprintf("%d + %d = ?", a, b), a + b
	}
	if a < b {
		a, b = b, a
	}
	return fmt.Sprintf("%d - %d = ?", a, b), a - b
}

// Challenge puts a new question to userID for an activity that has not ended. Errors:
// ErrNotFound, ErrEnded, ErrBusy.
func (ch *Challenges) Challenge(ctx context.Context, activityID, userID string) (Challenge, error) {
	s := ch.core
	a, err := s.Activity(ctx, activityID)
	if err != nil {
		return Challenge{}, err
	}
	now := s.now()
	if errors.Is(a.Open(now), ErrEnded) {
		return Challenge{}, ErrEnded
	}
	if ch.store == nil {
		return Challenge{}, fmt.Errorf("%w: no challenge store", ErrBusy)
	}
	q, answer := NewQuestion()
	c := Challenge{ID: NewToken("c"), ActivityID: a.ID, UserID: userID, Question: q, Answer: answer, IssuedAt: now}
	if err := ch.store.Put(ctx, c, ChallengeTTL); err != nil {
		return Challenge{}, fmt.Errorf("challenge for %s: %w", a.ID, err)
	}
	return c, nil
}

// Answer checks userID's answer to challenge id and, when it is right and the sale is open (or,
// for a line, taking tickets: before the start too), issues a pass for the activity unless vet
// (if set), told how long the user took, refuses it. The challenge is spent whatever the
// answer. Errors:
// ErrNotFound (no such activity), ErrNotStarted, ErrEnded (the challenge is kept), ErrChallengeFailed
// (a wrong answer, or a challenge unknown, expired, spent, or put to another user or for another
// activity), ErrBusy.
func (ch *Challenges) Answer(ctx context.Context, activityID, userID, id string, answer int64, vet func(solve time.Duration) error) (Pass, error) {
	s := ch.core
	a, err := s.Activity(ctx, activityID)
	if err != nil {
		return Pass{}, err
	}
	now := s.now()
	if err := a.Open(now); err != nil && !(a.Lined() && errors.Is(err, ErrNotStarted)) {
		return Pass{}, err
	}
	if ch.store == nil {
		return Pass{}, fmt.Errorf("%w: no challenge store", ErrBusy)
	}
	if id == "" || len(id) > MaxChallengeIDLen || strings.ContainsAny(id, "\n\x00") {
		return Pass{}, fmt.Errorf("%w: unknown challenge", ErrChallengeFailed)
	}
	c, err := ch.store.Take(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound) || err == nil && now.Sub(c.IssuedAt) > ChallengeTTL:
		return Pass{}, fmt.Errorf("%w: the challenge is unknown, expired or answered already", ErrChallengeFailed)
	case err != nil:
		return Pass{}, err
	case c.ActivityID != a.ID || c.UserID != userID:
		return Pass{}, fmt.Errorf("%w: the challenge was put to someone else", ErrChallengeFailed)
	case c.Answer != answer:
		return Pass{}, fmt.Errorf("%w: wrong answer; ask for a new challenge", ErrChallengeFailed)
	}
	p := Pass{Token: NewToken("p"), ExpiresAt: now.Add(PassTTL), Solve: now.Sub(c.IssuedAt)}
	if vet != nil {
		if err := vet(p.Solve); err != nil {
			return Pass{}, err
		}
	}
	if err := s.passes.IssuePass(ctx, a, userID, p.Token, now, p.ExpiresAt); err != nil {
		return Pass{}, fmt.Errorf("pass for %s: %w", a.ID, err)
	}
	return p, nil
}

// Challenges are the anti-bot challenges a buyer solves for a one-time path to grab through: a
// feature of its own, on its store and the core service's passes.
type Challenges struct {
	core  *Service
	store ChallengeStore
}

// NewChallenges returns the challenges of core's activities, kept by store.
func NewChallenges(core *Service, store ChallengeStore) *Challenges {
	return &Challenges{core: core, store: store}
}
