package embedded

import (
	"context"
	"sync"
	"time"

	"seckill/internal/rank"
	"seckill/internal/sale"
)

var _ sale.Ranking = (*Ranking)(nil)

// Ranking keeps red packets' leaderboards in this process: an exact order-statistic tree for an
// activity of up to ExactMax shares, a histogram of rank.Buckets buckets beyond.
type Ranking struct {
	exactMax int64

	mu     sync.RWMutex
	boards map[string]*board
}

// Drop implements sale.Ranking.
func (r *Ranking) Drop(_ context.Context, activityID string) error {
	r.mu.Lock()
	delete(r.boards, activityID)
	r.mu.Unlock()
	return nil
}

type board struct {
	mu     sync.Mutex
	exact  *rank.Exact  // nil when approximate
	approx *rank.Approx // nil when exact: it counts each share placed once, and uncounts it
	// when cancelled, by its amount; it cannot tell whether a token is on it
	// gone are the tokens removed: an add or restore told after the removal (a placement told
	// after its order was cancelled) leaves them off, and a second removal does nothing. A
	// load keeps them.
	gone map[string]bool
}

// NewRanking returns leaderboards that are exact up to exactMax shares.
func NewRanking(exactMax int64) *Ranking {
	return &Ranking{exactMax: exactMax, boards: map[string]*board{}}
}

func member(g sale.Grab) rank.Member {
	return rank.Member{ID: g.Token, User: g.UserID, Amount: g.AmountCents, At: g.At.UnixMilli()}
}

// Load implements sale.Ranking.
func (r *Ranking) Load(ctx context.Context, a sale.Activity, held []sale.Grab, max int64) error {
	b := &board{gone: map[string]bool{}}
	if old := r.board(a.ID); old != nil {
		old.mu.Lock()
		for tok := range old.gone {
			b.gone[tok] = true
		}
		old.mu.Unlock()
	}
	if a.Stock <= r.exactMax {
		b.exact = rank.NewExact()
	} else {
		b.approx = rank.NewApprox(max, rank.Buckets)
	}
	for _, g := range held {
		b.add(g)
	}
	r.mu.Lock()
	r.boards[a.ID] = b
	r.mu.Unlock()
	return nil
}

func (b *board) add(g sale.Grab) {
	if b.gone[g.Token] {
		return
	}
	if b.exact != nil {
		b.exact.Add(member(g))
		return
	}
	b.approx.Add(g.AmountCents)
}

func (r *Ranking) board(id string) *board {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.boards[id]
}

// Add implements sale.Ranking.
func (r *Ranking) Add(ctx context.Context, gs []sale.Grab) error {
	for _, g := range gs {
		if b := r.board(g.ActivityID); b != nil {
			b.mu.Lock()
			b.add(g)
			b.mu.Unlock()
		}
	}
	return nil
}

// Restore implements sale.Ranking: the exact tree adds a share it lacks (adding one it holds
// does nothing); a histogram is left as it is.
func (r *Ranking) Restore(ctx context.Context, gs []sale.Grab) error {
	for _, g := range gs {
		if b := r.board(g.ActivityID); b != nil {
			b.mu.Lock()
			if b.exact != nil && !b.gone[g.Token] {
				b.exact.Add(member(g))
			}
			b.mu.Unlock()
		}
	}
	return nil
}

// Remove implements sale.Ranking: each grab once, however often told; an add or restore told
// after it leaves the grab off.
func (r *Ranking) Remove(ctx context.Context, gs []sale.Grab) error {
	for _, g := range gs {
		b := r.board(g.ActivityID)
		if b == nil {
			continue
		}
		b.mu.Lock()
		if b.gone[g.Token] {
			b.mu.Unlock()
			continue
		}
		b.gone[g.Token] = true
		if b.exact != nil {
			b.exact.Remove(g.Token)
		} else {
			b.approx.Remove(g.AmountCents)
		}
		b.mu.Unlock()
	}
	return nil
}

// Top implements sale.Ranking.
func (r *Ranking) Top(ctx context.Context, activityID string, n int) ([]sale.Standing, error) {
	b := r.board(activityID)
	if b == nil {
		return nil, sale.ErrNotFound
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.exact == nil {
		return nil, sale.ErrApproximate
	}
	top := b.exact.Top(n)
	out := make([]sale.Standing, len(top))
	for i, m := range top {
		out[i] = sale.Standing{Rank: int64(i + 1), UserID: m.User, AmountCents: m.Amount, GrabbedAt: time.UnixMilli(m.At).UTC()}
	}
	return out, nil
}

// Rank implements sale.Ranking.
func (r *Ranking) Rank(ctx context.Context, g sale.Grab) (int64, int64, string, error) {
	b := r.board(g.ActivityID)
	if b == nil {
		return 0, 0, "", sale.ErrNotFound
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.exact != nil {
		n := b.exact.Rank(g.Token)
		if n == 0 {
			return 0, 0, "", sale.ErrNotFound
		}
		return int64(n), 0, sale.RankExact, nil
	}
	est, bound := b.approx.Rank(g.AmountCents)
	return est, bound, sale.RankApprox, nil
}

// Usage implements sale.Ranking.
func (r *Ranking) Usage(ctx context.Context, activityID string) (string, int64, error) {
	b := r.board(activityID)
	if b == nil {
		return "", 0, sale.ErrNotFound
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.exact != nil {
		return sale.RankExact, b.exact.Bytes(), nil
	}
	return sale.RankApprox, b.approx.Bytes(), nil
}
