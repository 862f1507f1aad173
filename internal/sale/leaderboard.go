package sale

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The red packet's leaderboard (手气榜): who got the largest shares, largest first, ties broken
// by the earlier grab. It is fed by the orders the workers place, so once the queue is drained it
// agrees with the database exactly. Three strategies answer it:
//
//   - exact: an in-memory order-statistic tree (embedded) or a Redis sorted set (distributed);
//   - approximate, for activities with more shares than the exact one should hold: a histogram
//     of amounts of a few kilobytes estimates a rank within a stated bound, and the top of the
//     board is read from the database's covering index;
//   - database, when the cache cannot answer: the covering index (activity, amount, time)
//     gives the top with a bounded range scan and a rank with COUNT(*)+1.

// The strategies, as they are named in answers, stats and metrics.
const (
	RankExact    = "exact"
	RankApprox   = "approximate"
	RankDatabase = "database"
)

// Standing is a place on a leaderboard.
type Standing struct {
	Rank        int64
	UserID      string
	AmountCents int64
	GrabbedAt   time.Time
}

// Board is a leaderboard's top, or one user's standing.
type Board struct {
	Entries  []Standing
	Exact    bool
	Bound    int64 // approximate: the most a rank may be off
	Strategy string
}

// MaxBoard bounds the entries a leaderboard answer may hold.
const MaxBoard = 100

// ErrApproximate says a leaderboard is kept as a histogram: it ranks, but has no top.
var ErrApproximate = errors.New("the leaderboard is approximate")

// Boards are the red packets' leaderboards (手气榜): answered by the ranking kept beside the gate
// (the core service's, which loads it), or by the database's index of the orders when the
// ranking is approximate or cannot answer. A feature of its own.
type Boards struct {
	core    *Service
	leaders LeaderStore
}

// NewBoards returns the leaderboards of core's red packets, the database answering through
// leaders.
func NewBoards(core *Service, leaders LeaderStore) *Boards {
	return &Boards{core: core, leaders: leaders}
}

// redPacket returns the red packet id, or an error if it is not one.
func (b *Boards) redPacket(ctx context.Context, id string) (Activity, error) {
	a, err := b.core.Activity(ctx, id)
	if err != nil {
		return Activity{}, err
	}
	if a.Kind != KindRedPacket {
		return Activity{}, fmt.Errorf("%w: activity %s is not a red packet: it has no leaderboard", ErrNotFound, id)
	}
	return a, nil
}

// Leaderboard returns the first n of a red packet's leaderboard: from the exact leaderboard, or
// from the database when the leaderboard is approximate or cannot answer.
func (b *Boards) Leaderboard(ctx context.Context, id string, n int) (Board, error) {
	a, err := b.redPacket(ctx, id)
	if err != nil {
		return Board{}, err
	}
	n = min(max(n, 1), MaxBoard)
	if ranking := b.core.ranking; ranking != nil {
		top, err := ranking.Top(ctx, a.ID, n)
		if err == nil {
			return Board{Entries: top, Exact: true, Strategy: RankExact}, nil
		}
		if !errors.Is(err, ErrApproximate) && !errors.Is(err, ErrBusy) && !errors.Is(err, ErrNotFound) {
			return Board{}, err
		}
	}
	top, err := b.leaders.TopGrabs(ctx, a.ID, n)
	if err != nil {
		return Board{}, err
	}
	return Board{Entries: top, Exact: true, Strategy: RankDatabase}, nil
}

// Rank returns userID's standing on a red packet's leaderboard (their largest share). Errors:
// ErrNotFound (not a red packet, or no share placed for the user yet).
func (b *Boards) Rank(ctx context.Context, id, userID string) (Board, error) {
	a, err := b.redPacket(ctx, id)
	if err != nil {
		return Board{}, err
	}
	g, err := b.leaders.BestGrab(ctx, a.ID, userID)
	if err != nil {
		return Board{}, err
	}
	st := Standing{UserID: userID, AmountCents: g.AmountCents, GrabbedAt: g.At}
	if ranking := b.core.ranking; ranking != nil {
		r, bound, strategy, err := ranking.Rank(ctx, g)
		if err == nil {
			st.Rank = r
			return Board{Entries: []Standing{st}, Exact: bound == 0, Bound: bound, Strategy: strategy}, nil
		}
		if !errors.Is(err, ErrBusy) && !errors.Is(err, ErrNotFound) {
			return Board{}, err
		}
	}
	if st.Rank, err = b.leaders.RankOf(ctx, g); err != nil {
		return Board{}, err
	}
	return Board{Entries: []Standing{st}, Exact: true, Strategy: RankDatabase}, nil
}

// OrdersPlaced puts the red-packet shares of newly created orders on their leaderboards. The
// worker calls it after each batch; a failure is the leaderboard's, not the order's, and the
// database fallback still answers meanwhile. A caller whose call failed tells the same
// placements again with OrdersPlacedAgain.
func (b *Boards) OrdersPlaced(ctx context.Context, ps []Placement) error {
	return b.core.rank(ctx, ps, false)
}

// OrdersPlacedAgain is OrdersPlaced for placements told before by a call that failed, which may
// have added some of their shares (a reply lost): each holding share is put back where it is
// missing (sale.Ranking.Restore), none counted twice. An approximate board (a histogram) cannot
// tell which it has, and is left as it is.
func (b *Boards) OrdersPlacedAgain(ctx context.Context, ps []Placement) error {
	return b.core.rank(ctx, ps, true)
}

// rank puts the red-packet shares of the orders ps placed on their leaderboards: the new ones
// added, the ones met again restored (the placement that created one may have committed with its
// reply lost, and told nobody; or, told, tells again: all again).
func (s *Service) rank(ctx context.Context, ps []Placement, told bool) error {
	if s.ranking == nil {
		return nil
	}
	var added, again []Grab
	for _, p := range ps {
		switch {
		case !p.Order.Status.Holds() || !s.isRedPacket(ctx, p.Order.ActivityID):
		case p.New && !told:
			added = append(added, p.Order.Grab())
		default:
			again = append(again, p.Order.Grab())
		}
	}
	var err error
	if len(added) > 0 {
		err = s.ranking.Add(ctx, added)
	}
	if len(again) > 0 {
		err = errors.Join(err, s.ranking.Restore(ctx, again))
	}
	return err
}

func (s *Service) isRedPacket(ctx context.Context, id string) bool {
	a, err := s.Activity(ctx, id)
	return err == nil && a.Kind == KindRedPacket
}

// loadRanking rebuilds a red packet's leaderboard from what the gate is loaded with: the grabs
// that hold a share, less those still queued (the worker adds them when it places their orders).
func (s *Service) loadRanking(ctx context.Context, a Activity, st GateState, queued []Grab) error {
	if s.ranking == nil || a.Kind != KindRedPacket {
		return nil
	}
	pending := make(map[string]bool, len(queued))
	for _, g := range queued {
		pending[g.Token] = true
	}
	var top int64
	for _, sh := range st.Shares {
		top = max(top, sh.AmountCents)
	}
	placed := make([]Grab, 0, len(st.Held))
	for _, h := range st.Held {
		top = max(top, h.AmountCents)
		if !pending[h.Token] {
			placed = append(placed, h)
		}
	}
	return s.ranking.Load(ctx, a, placed, top)
}

// BoardUsage is what one red packet's leaderboard costs.
type BoardUsage struct {
	ActivityID string
	Strategy   string
	Bytes      int64
}

// Usage names the strategy of a red packet's leaderboard and the memory it holds.
func (b *Boards) Usage(ctx context.Context, id string) (BoardUsage, error) {
	a, err := b.redPacket(ctx, id)
	if err != nil {
		return BoardUsage{}, err
	}
	u := BoardUsage{ActivityID: a.ID, Strategy: RankDatabase}
	if b.core.ranking == nil {
		return u, nil
	}
	strategy, n, err := b.core.ranking.Usage(ctx, a.ID)
	switch {
	case err == nil:
		u.Strategy, u.Bytes = strategy, n
	case !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrBusy):
		return BoardUsage{}, err
	}
	return u, nil
}

// Usages reports the leaderboards of every red packet this node knows that has not ended, for
// the metrics.
func (b *Boards) Usages(ctx context.Context) []BoardUsage {
	var out []BoardUsage
	now := b.core.now()
	b.core.acts.Range(func(_, v any) bool {
		a := v.(Activity)
		if a.Kind == KindRedPacket && now.Before(a.EndAt) {
			if u, err := b.Usage(ctx, a.ID); err == nil {
				out = append(out, u)
			}
		}
		return true
	})
	return out
}
