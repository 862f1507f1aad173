package saletest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"seckill/internal/sale"
)

// Answers is a sale.ChallengeStore that remembers the answer of every challenge put through it, so a
// test can solve what a person would read off the image.
type Answers struct {
	sale.ChallengeStore
	mu      sync.Mutex
	answers map[string]int64
}

// NewAnswers wraps c.
func NewAnswers(c sale.ChallengeStore) *Answers {
	return &Answers{ChallengeStore: c, answers: map[string]int64{}}
}

// Put implements sale.ChallengeStore.
func (a *Answers) Put(ctx context.Context, c sale.Challenge, ttl time.Duration) error {
	a.mu.Lock()
	a.answers[c.ID] = c.Answer
	a.mu.Unlock()
	return a.ChallengeStore.Put(ctx, c, ttl)
}

// Of returns the answer of challenge id.
func (a *Answers) Of(t testing.TB, id string) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	n, ok := a.answers[id]
	if !ok {
		t.Fatalf("no challenge %s was put", id)
	}
	return n
}

// ChallengeJourney checks the challenge end to end on env: before the start a challenge may be
// fetched but not answered; a wrong answer spends it; a right one earns a pass that buys once,
// for its user and its activity only; a challenge expires.
func ChallengeJourney(t *testing.T, env Env) {
	ctx := context.Background()
	svc, clock := env.Service, env.Clock
	start := clock.Now().Add(time.Minute)
	act := func(name string) sale.Activity {
		a, err := svc.CreateActivity(ctx, sale.Activity{Name: name, Kind: sale.KindItem, Stock: 5, PriceCents: 100,
			StartAt: start, EndAt: start.Add(time.Hour), PayWindow: time.Minute, RequireChallenge: true})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a, b := act("guarded"), act("other")
	ask := func(user string) sale.Challenge {
		t.Helper()
		c, err := env.Challenges.Challenge(ctx, a.ID, user)
		if err != nil {
			t.Fatalf("challenge for %s: %v", user, err)
		}
		if c.Question == "" || c.ID == "" {
			t.Fatalf("empty challenge %+v", c)
		}
		return c
	}
	early := ask("alice")
	if _, err := env.Challenges.Answer(ctx, a.ID, "alice", early.ID, env.Answers.Of(t, early.ID), nil); !errors.Is(err, sale.ErrNotStarted) {
		t.Fatalf("answer before the start: got %v, want ErrNotStarted", err)
	}
	clock.Advance(time.Minute)
	// The challenge fetched early is still good once the sale opens.
	pass, err := env.Challenges.Answer(ctx, a.ID, "alice", early.ID, env.Answers.Of(t, early.ID), nil)
	if err != nil {
		t.Fatalf("right answer: %v", err)
	}
	if pass.Token == "" || !pass.ExpiresAt.Equal(clock.Now().Add(sale.PassTTL)) || pass.Solve != time.Minute {
		t.Fatalf("pass %+v, want a token expiring in %v and a solve time of 1m", pass, sale.PassTTL)
	}
	if _, err := env.Challenges.Answer(ctx, a.ID, "alice", early.ID, env.Answers.Of(t, early.ID), nil); !errors.Is(err, sale.ErrChallengeFailed) {
		t.Fatalf("the same challenge answered twice: got %v, want ErrChallengeFailed", err)
	}

	wrong := ask("bob")
	if _, err := env.Challenges.Answer(ctx, a.ID, "bob", wrong.ID, env.Answers.Of(t, wrong.ID)+1, nil); !errors.Is(err, sale.ErrChallengeFailed) {
		t.Fatalf("wrong answer: got %v, want ErrChallengeFailed", err)
	}
	if _, err := env.Challenges.Answer(ctx, a.ID, "bob", wrong.ID, env.Answers.Of(t, wrong.ID), nil); !errors.Is(err, sale.ErrChallengeFailed) {
		t.Fatalf("the right answer after a wrong one: got %v, want ErrChallengeFailed (one try)", err)
	}
	stolen := ask("carol")
	if _, err := env.Challenges.Answer(ctx, a.ID, "mallory", stolen.ID, env.Answers.Of(t, stolen.ID), nil); !errors.Is(err, sale.ErrChallengeFailed) {
		t.Fatalf("carol's challenge answered by mallory: got %v, want ErrChallengeFailed", err)
	}
	elsewhere := ask("dave")
	if _, err := env.Challenges.Answer(ctx, b.ID, "dave", elsewhere.ID, env.Answers.Of(t, elsewhere.ID), nil); !errors.Is(err, sale.ErrChallengeFailed) {
		t.Fatalf("a challenge of one activity answered for another: got %v, want ErrChallengeFailed", err)
	}
	stale := ask("erin")
	clock.Advance(sale.ChallengeTTL + time.Second)
	if _, err := env.Challenges.Answer(ctx, a.ID, "erin", stale.ID, env.Answers.Of(t, stale.ID), nil); !errors.Is(err, sale.ErrChallengeFailed) {
		t.Fatalf("an expired challenge: got %v, want ErrChallengeFailed", err)
	}
	if _, err := env.Challenges.Answer(ctx, a.ID, "erin", "c-made-up", 3, nil); !errors.Is(err, sale.ErrChallengeFailed) {
		t.Fatalf("a made-up challenge: got %v, want ErrChallengeFailed", err)
	}

	// The pass: alice's expired with the clock; a fresh one buys once.
	grab := func(user, pass string) error {
		_, err := svc.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: user, Pass: pass})
		return err
	}
	if err := grab("alice", pass.Token); !errors.Is(err, sale.ErrChallengeRequired) {
		t.Fatalf("an expired pass: got %v, want ErrChallengeRequired", err)
	}
	c := ask("alice")
	pass, err = env.Challenges.Answer(ctx, a.ID, "alice", c.ID, env.Answers.Of(t, c.ID), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := grab("alice", ""); !errors.Is(err, sale.ErrChallengeRequired) {
		t.Fatalf("a bare grab: got %v, want ErrChallengeRequired", err)
	}
	if err := grab("mallory", pass.Token); !errors.Is(err, sale.ErrChallengeRequired) {
		t.Fatalf("alice's pass used by mallory: got %v, want ErrChallengeRequired", err)
	}
	if _, err := svc.Grab(ctx, sale.GrabRequest{ActivityID: b.ID, UserID: "alice", Pass: pass.Token}); !errors.Is(err, sale.ErrChallengeRequired) {
		t.Fatalf("alice's pass on another activity: got %v, want ErrChallengeRequired", err)
	}
	if err := grab("alice", pass.Token); err != nil {
		t.Fatalf("alice's pass: %v", err)
	}
	if err := grab("alice", pass.Token); !errors.Is(err, sale.ErrChallengeRequired) {
		t.Fatalf("alice's pass replayed: got %v, want ErrChallengeRequired", err)
	}
	env.Drain(a.ID)
	if c, err := env.Store.Counts(ctx, a.ID); err != nil || c.Orders != 1 {
		t.Fatalf("orders %+v, %v; want exactly alice's one", c, err)
	}
}
