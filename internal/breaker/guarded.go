package breaker

//go:generate go run ./guardgen -sale ../sale -o guarded_gen.go

import (
	"context"
	"time"

	"seckill/internal/ratelimit"
	"seckill/internal/risk"
)

// The decorators of the domain's ports (GuardGate, GuardStore, GuardLine, GuardRanking,
// GuardLeaders, GuardChallenges) are generated from internal/sale's ports, with which of their
// methods are slow or not guarded and why in guardgen's table: go generate ./internal/breaker.

// GuardLimiter returns l with every call guarded by guard: rate limits kept on Redis fail with
// it.
func GuardLimiter(l ratelimit.Limiter, guard *Guard) ratelimit.Limiter {
	return guardedLimiter{l, guard}
}

type guardedLimiter struct {
	l     ratelimit.Limiter
	guard *Guard
}

func (x guardedLimiter) Allow(ctx context.Context, key string, r ratelimit.Rule) (ratelimit.Decision, error) {
	return Call(ctx, x.guard, func(ctx context.Context) (ratelimit.Decision, error) { return x.l.Allow(ctx, key, r) })
}

// GuardRiskWindows returns w with every call guarded by guard: the risk windows kept on Redis
// fail with it, and their failures count against it.
func GuardRiskWindows(w risk.Windows, guard *Guard) risk.Windows {
	return guardedRiskWindows{w, guard}
}

type guardedRiskWindows struct {
	w     risk.Windows
	guard *Guard
}

func (x guardedRiskWindows) Count(ctx context.Context, k risk.Keys, at time.Time) (risk.Seen, error) {
	return Call(ctx, x.guard, func(ctx context.Context) (risk.Seen, error) { return x.w.Count(ctx, k, at) })
}

func (x guardedRiskWindows) Solved(ctx context.Context, user string, solve time.Duration, at time.Time) error {
	return x.guard.Do(ctx, func(ctx context.Context) error { return x.w.Solved(ctx, user, solve, at) })
}

// slowCall is Call without the deadline (see Guard.Slow).
func slowCall[T any](ctx context.Context, g *Guard, f func(ctx context.Context) (T, error)) (T, error) {
	return guarded(ctx, g, slowWithin, f)
}
