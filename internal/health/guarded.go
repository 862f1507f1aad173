package health

import (
	"context"
	"time"

	"seckill/internal/ratelimit"
	"seckill/internal/sale"
)

// Gate returns g with every call guarded by guard.
func Gate(g sale.Gate, guard *Guard) sale.Gate { return guardedGate{g, guard} }

type guardedGate struct {
	g     sale.Gate
	guard *Guard
}

func (x guardedGate) Load(ctx context.Context, a sale.Activity, st sale.GateState) error {
	return x.guard.Slow(ctx, func(ctx context.Context) error { return x.g.Load(ctx, a, st) })
}

func (x guardedGate) Warm(ctx context.Context, a sale.Activity, st sale.GateState) (bool, error) {
	return slowCall(ctx, x.guard, func(ctx context.Context) (bool, error) { return x.g.Warm(ctx, a, st) })
}

func (x guardedGate) Repair(ctx context.Context, a sale.Activity, read func(ctx context.Context, remaining int64) (sale.GateState, bool, error)) (bool, error) {
	return slowCall(ctx, x.guard, func(ctx context.Context) (bool, error) { return x.g.Repair(ctx, a, read) })
}

func (x guardedGate) Grab(ctx context.Context, r sale.GrabRequest) (sale.Grab, error) {
	return Call(ctx, x.guard, func(ctx context.Context) (sale.Grab, error) { return x.g.Grab(ctx, r) })
}

func (x guardedGate) IssuePass(ctx context.Context, a sale.Activity, userID, token string, now, expires time.Time) error {
	return x.guard.Do(ctx, func(ctx context.Context) error { return x.g.IssuePass(ctx, a, userID, token, now, expires) })
}

func (x guardedGate) SpendPass(ctx context.Context, activityID, userID, token string, now time.Time) error {
	return x.guard.Do(ctx, func(ctx context.Context) error { return x.g.SpendPass(ctx, activityID, userID, token, now) })
}

func (x guardedGate) Release(ctx context.Context, g sale.Grab) error {
	return x.guard.Do(ctx, func(ctx context.Context) error { return x.g.Release(ctx, g) })
}

func (x guardedGate) Drop(ctx context.Context, activityID string) error {
	return x.guard.Do(ctx, func(ctx context.Context) error { return x.g.Drop(ctx, activityID) })
}

func (x guardedGate) Remaining(ctx context.Context, activityID string) (int64, error) {
	return Call(ctx, x.guard, func(ctx context.Context) (int64, error) { return x.g.Remaining(ctx, activityID) })
}

// Limiter returns l with every call guarded by guard: rate limits kept on Redis fail with it.
func Limiter(l ratelimit.Limiter, guard *Guard) ratelimit.Limiter { return guardedLimiter{l, guard} }

type guardedLimiter struct {
	l     ratelimit.Limiter
	guard *Guard
}

func (x guardedLimiter) Allow(ctx context.Context, key string, r ratelimit.Rule) (ratelimit.Decision, error) {
	return Call(ctx, x.guard, func(ctx context.Context) (ratelimit.Decision, error) { return x.l.Allow(ctx, key, r) })
}

// slowCall is Call without the deadline (see Guard.Slow).
func slowCall[T any](ctx context.Context, g *Guard, f func(ctx context.Context) (T, error)) (T, error) {
	return guarded(ctx, g, 0, f)
}

// Challenges returns c with every call guarded by guard.
func Challenges(c sale.Challenges, guard *Guard) sale.Challenges { return guardedChallenges{c, guard} }

type guardedChallenges struct {
	c     sale.Challenges
	guard *Guard
}

func (x guardedChallenges) Put(ctx context.Context, c sale.Challenge, ttl time.Duration) error {
	return x.guard.Do(ctx, func(ctx context.Context) error { return x.c.Put(ctx, c, ttl) })
}

func (x guardedChallenges) Take(ctx context.Context, id string) (sale.Challenge, error) {
	return Call(ctx, x.guard, func(ctx context.Context) (sale.Challenge, error) { return x.c.Take(ctx, id) })
}

// Store returns s with every call but Ping guarded by guard. Ping goes straight through: it is
// how /readyz tells whether the database answers, whatever the breaker thinks.
func Store(s sale.Store, guard *Guard) sale.Store { return guardedStore{s, guard} }

type guardedStore struct {
	s     sale.Store
	guard *Guard
}

func (x guardedStore) do(ctx context.Context, call func(ctx context.Context) error) error {
	return x.guard.Do(ctx, call)
}

func (x guardedStore) CreateActivity(ctx context.Context, a sale.Activity, shares []int64) error {
	return x.do(ctx, func(ctx context.Context) error { return x.s.CreateActivity(ctx, a, shares) })
}

func (x guardedStore) Activity(ctx context.Context, id string) (sale.Activity, error) {
	return Call(ctx, x.guard, func(ctx context.Context) (sale.Activity, error) { return x.s.Activity(ctx, id) })
}

func (x guardedStore) Activities(ctx context.Context, since time.Time) ([]sale.Activity, error) {
	return slowCall(ctx, x.guard, func(ctx context.Context) ([]sale.Activity, error) { return x.s.Activities(ctx, since) })
}

func (x guardedStore) Archive(ctx context.Context, id string, at time.Time) error {
	return x.do(ctx, func(ctx context.Context) error { return x.s.Archive(ctx, id, at) })
}

func (x guardedStore) GateState(ctx context.Context, a sale.Activity, pending []sale.Grab) (sale.GateState, error) {
	return slowCall(ctx, x.guard, func(ctx context.Context) (sale.GateState, error) { return x.s.GateState(ctx, a, pending) })
}

func (x guardedStore) PlaceOrders(ctx context.Context, gs []sale.Grab) ([]sale.Placement, error) {
	return Call(ctx, x.guard, func(ctx context.Context) ([]sale.Placement, error) { return x.s.PlaceOrders(ctx, gs) })
}

func (x guardedStore) Order(ctx context.Context, token string) (sale.Order, error) {
	return Call(ctx, x.guard, func(ctx context.Context) (sale.Order, error) { return x.s.Order(ctx, token) })
}

func (x guardedStore) OrderByID(ctx context.Context, id int64) (sale.Order, error) {
	return Call(ctx, x.guard, func(ctx context.Context) (sale.Order, error) { return x.s.OrderByID(ctx, id) })
}

func (x guardedStore) Pay(ctx context.Context, token string, now time.Time) (sale.Order, error) {
	return Call(ctx, x.guard, func(ctx context.Context) (sale.Order, error) { return x.s.Pay(ctx, token, now) })
}

func (x guardedStore) Cancel(ctx context.Context, token, reason string, now time.Time) (sale.Order, bool, error) {
	type r struct {
		o   sale.Order
		won bool
	}
	// Never abandoned at a deadline: the caller that won the cancellation must learn it, as it
	// is the one that restocks.
	v, err := slowCall(ctx, x.guard, func(ctx context.Context) (r, error) {
		o, won, err := x.s.Cancel(ctx, token, reason, now)
		return r{o, won}, err
	})
	return v.o, v.won, err
}

func (x guardedStore) Unreleased(ctx context.Context, limit int) ([]sale.Order, error) {
	return Call(ctx, x.guard, func(ctx context.Context) ([]sale.Order, error) { return x.s.Unreleased(ctx, limit) })
}

func (x guardedStore) Released(ctx context.Context, token string) error {
	return x.do(ctx, func(ctx context.Context) error { return x.s.Released(ctx, token) })
}

func (x guardedStore) Expired(ctx context.Context, now time.Time, limit int) ([]sale.Order, error) {
	return Call(ctx, x.guard, func(ctx context.Context) ([]sale.Order, error) { return x.s.Expired(ctx, now, limit) })
}

func (x guardedStore) Counts(ctx context.Context, activityID string) (sale.Counts, error) {
	return Call(ctx, x.guard, func(ctx context.Context) (sale.Counts, error) { return x.s.Counts(ctx, activityID) })
}

func (x guardedStore) DeadLetter(ctx context.Context, g sale.Grab, attempts int, reason string, now time.Time) error {
	return x.do(ctx, func(ctx context.Context) error { return x.s.DeadLetter(ctx, g, attempts, reason, now) })
}

func (x guardedStore) AddBlock(ctx context.Context, b sale.Block) error {
	return x.do(ctx, func(ctx context.Context) error { return x.s.AddBlock(ctx, b) })
}

func (x guardedStore) RemoveBlock(ctx context.Context, kind sale.BlockKind, value string) error {
	return x.do(ctx, func(ctx context.Context) error { return x.s.RemoveBlock(ctx, kind, value) })
}

func (x guardedStore) Blocks(ctx context.Context, now time.Time) ([]sale.Block, error) {
	return Call(ctx, x.guard, func(ctx context.Context) ([]sale.Block, error) { return x.s.Blocks(ctx, now) })
}

func (x guardedStore) Ping(ctx context.Context) error { return x.s.Ping(ctx) }

// Ranking returns r with every call guarded by guard (the leaderboards kept on Redis).
func Ranking(r sale.Ranking, guard *Guard) sale.Ranking { return guardedRanking{r, guard} }

func (x guardedRanking) Drop(ctx context.Context, activityID string) error {
	return x.guard.Do(ctx, func(ctx context.Context) error { return x.r.Drop(ctx, activityID) })
}

type guardedRanking struct {
	r     sale.Ranking
	guard *Guard
}

func (x guardedRanking) Load(ctx context.Context, a sale.Activity, held []sale.Grab, max int64) error {
	return x.guard.Slow(ctx, func(ctx context.Context) error { return x.r.Load(ctx, a, held, max) })
}

func (x guardedRanking) Add(ctx context.Context, gs []sale.Grab) error {
	return x.guard.Do(ctx, func(ctx context.Context) error { return x.r.Add(ctx, gs) })
}

func (x guardedRanking) Remove(ctx context.Context, gs []sale.Grab) error {
	return x.guard.Do(ctx, func(ctx context.Context) error { return x.r.Remove(ctx, gs) })
}

func (x guardedRanking) Top(ctx context.Context, activityID string, n int) ([]sale.Standing, error) {
	return Call(ctx, x.guard, func(ctx context.Context) ([]sale.Standing, error) { return x.r.Top(ctx, activityID, n) })
}

func (x guardedRanking) Rank(ctx context.Context, g sale.Grab) (int64, int64, string, error) {
	type r struct {
		rank, bound int64
		strategy    string
	}
	v, err := Call(ctx, x.guard, func(ctx context.Context) (r, error) {
		rank, bound, strategy, err := x.r.Rank(ctx, g)
		return r{rank, bound, strategy}, err
	})
	return v.rank, v.bound, v.strategy, err
}

func (x guardedRanking) Usage(ctx context.Context, activityID string) (string, int64, error) {
	type r struct {
		strategy string
		bytes    int64
	}
	v, err := Call(ctx, x.guard, func(ctx context.Context) (r, error) {
		s, b, err := x.r.Usage(ctx, activityID)
		return r{s, b}, err
	})
	return v.strategy, v.bytes, err
}

// Leaders returns l with every call guarded by guard (the database's leaderboard queries).
func Leaders(l sale.LeaderStore, guard *Guard) sale.LeaderStore { return guardedLeaders{l, guard} }

type guardedLeaders struct {
	l     sale.LeaderStore
	guard *Guard
}

func (x guardedLeaders) TopGrabs(ctx context.Context, activityID string, n int) ([]sale.Standing, error) {
	return Call(ctx, x.guard, func(ctx context.Context) ([]sale.Standing, error) { return x.l.TopGrabs(ctx, activityID, n) })
}

func (x guardedLeaders) RankOf(ctx context.Context, g sale.Grab) (int64, error) {
	return Call(ctx, x.guard, func(ctx context.Context) (int64, error) { return x.l.RankOf(ctx, g) })
}

func (x guardedLeaders) BestGrab(ctx context.Context, activityID, userID string) (sale.Grab, error) {
	return Call(ctx, x.guard, func(ctx context.Context) (sale.Grab, error) { return x.l.BestGrab(ctx, activityID, userID) })
}

// Line guards a waiting line's calls: joins, polls and the drainer's steps fail fast while the
// breaker is open. Sealing and reading the early crowd grow with the crowd and only the client's
// timeouts bound them.
func Line(l sale.Line, guard *Guard) sale.Line { return guardedLine{l, guard} }

type guardedLine struct {
	l     sale.Line
	guard *Guard
}

func (x guardedLine) Join(ctx context.Context, r sale.JoinRequest) (sale.Joined, error) {
	return Call(ctx, x.guard, func(ctx context.Context) (sale.Joined, error) { return x.l.Join(ctx, r) })
}

type ticketState struct {
	t  sale.Ticket
	st sale.LineState
}

func (x guardedLine) Ticket(ctx context.Context, token string) (sale.Ticket, sale.LineState, error) {
	v, err := Call(ctx, x.guard, func(ctx context.Context) (ticketState, error) {
		t, st, err := x.l.Ticket(ctx, token)
		return ticketState{t, st}, err
	})
	return v.t, v.st, err
}

func (x guardedLine) Drop(ctx context.Context, activityID string) error {
	return x.guard.Do(ctx, func(ctx context.Context) error { return x.l.Drop(ctx, activityID) })
}

func (x guardedLine) State(ctx context.Context, activityID string) (sale.LineState, error) {
	return Call(ctx, x.guard, func(ctx context.Context) (sale.LineState, error) { return x.l.State(ctx, activityID) })
}

func (x guardedLine) Seal(ctx context.Context, a sale.Activity) (st sale.LineState, err error) {
	err = x.guard.Slow(ctx, func(ctx context.Context) error {
		st, err = x.l.Seal(ctx, a)
		return err
	})
	return st, err
}

func (x guardedLine) Early(ctx context.Context, activityID string) (tokens []string, err error) {
	err = x.guard.Slow(ctx, func(ctx context.Context) error {
		tokens, err = x.l.Early(ctx, activityID)
		return err
	})
	return tokens, err
}

type batch struct {
	from, to int64
	ts       []sale.Ticket
}

func (x guardedLine) Next(ctx context.Context, activityID string, n int) (int64, int64, []sale.Ticket, error) {
	v, err := Call(ctx, x.guard, func(ctx context.Context) (batch, error) {
		from, to, ts, err := x.l.Next(ctx, activityID, n)
		return batch{from, to, ts}, err
	})
	return v.from, v.to, v.ts, err
}

func (x guardedLine) Admit(ctx context.Context, activityID string, from, to int64, ts []sale.Ticket, rate float64) error {
	return x.guard.Do(ctx, func(ctx context.Context) error { return x.l.Admit(ctx, activityID, from, to, ts, rate) })
}

func (x guardedLine) Skip(ctx context.Context, activityID string, from int64) (int64, error) {
	return Call(ctx, x.guard, func(ctx context.Context) (int64, error) { return x.l.Skip(ctx, activityID, from) })
}

func (x guardedLine) Lead(ctx context.Context, activityID, holder string, ttl time.Duration) (bool, error) {
	return Call(ctx, x.guard, func(ctx context.Context) (bool, error) { return x.l.Lead(ctx, activityID, holder, ttl) })
}
