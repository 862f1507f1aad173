package health

//go:generate go run ./guardgen -sale ../sale -o guarded_gen.go

import (
	"context"

	"seckill/internal/ratelimit"
)

// The decorators of the domain's ports (GuardGate, GuardStore, GuardLine, GuardRanking,
// GuardLeaders, GuardChallenges) are generated from internal/sale's ports, with which of their
// methods are slow or not guarded and why in guardgen's table: go generate ./internal/health.

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

// slowCall is Call without the deadline (see Guard.Slow).
func slowCall[T any](ctx context.Context, g *Guard, f func(ctx context.Context) (T, error)) (T, error) {
	return guarded(ctx, g, slowWithin, f)
}
