package saletest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"seckill/internal/sale"
)

// grabAll has users grab activity id from 64 goroutines and returns each winner's grab.
func grabAll(t *testing.T, env Env, id string, users int) map[string]sale.Grab {
	ctx := context.Background()
	var mu sync.Mutex
	won := map[string]sale.Grab{}
	next := make(chan int)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for u := range next {
				user := fmt.Sprint("u", u)
				g, err := env.Service.Grab(ctx, sale.GrabRequest{ActivityID: id, UserID: user})
				switch {
				case err == nil:
					mu.Lock()
					won[user] = g
					mu.Unlock()
				case !errors.Is(err, sale.ErrSoldOut):
					t.Errorf("grab by %s: %v", user, err)
				}
			}
		})
	}
	for u := range users {
		next <- u
	}
	close(next)
	wg.Wait()
	return won
}

// LeaderboardTests runs a red-packet rain on env and checks its leaderboard against the database:
// 10,000 users on 1,000 shares give exactly 1,000 winners whose shares sum to the total, the
// exact leaderboard's top and every winner's rank agree with the database's, the first
// placements' replies lost after their commits; an activity with
// more shares than ExactMax is ranked by its histogram within the stated bound, and its top
// comes from the database.
func LeaderboardTests(t *testing.T, env Env) {
	ctx := context.Background()
	start := env.Clock.Now()
	rain := func(name string, shares, total int64) sale.Activity {
		a, err := env.Service.CreateActivity(ctx, sale.Activity{Name: name, Kind: sale.KindRedPacket, Stock: shares,
			TotalCents: total, StartAt: start, EndAt: start.Add(time.Hour), PayWindow: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	t.Run("Exact", func(t *testing.T) {
		a := rain("rain", 1_000, 100_000)
		// The first placements commit with their replies lost: whoever places those grabs again
		// finds the orders there, and their shares must be on the leaderboard all the same. And
		// the first two changes of the board fail (Redis out of reach after a placement): the
		// shares they carried must get there too.
		env.Faults.LosePlacementReplies(3)
		env.Faults.FailRankings(2)
		won := grabAll(t, env, a.ID, 10_000)
		if len(won) != 1_000 {
			t.Fatalf("%d winners, want 1000", len(won))
		}
		var sum int64
		shares := map[int64]bool{}
		for _, g := range won {
			sum += g.AmountCents
			if shares[g.Share] {
				t.Fatalf("share %d won twice", g.Share)
			}
			shares[g.Share] = true
		}
		if sum != 100_000 {
			t.Fatalf("the shares won sum to %d, want 100000", sum)
		}
		env.Drain(a.ID)
		board, err := env.Boards.Leaderboard(ctx, a.ID, sale.MaxBoard)
		if err != nil || board.Strategy != sale.RankExact || !board.Exact {
			t.Fatalf("leaderboard: %+v, %v; want the exact one", board, err)
		}
		db, err := env.Store.(sale.LeaderStore).TopGrabs(ctx, a.ID, sale.MaxBoard)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(board.Entries) != fmt.Sprint(db) {
			t.Fatalf("the exact top and the database's differ:\n%v\n%v", board.Entries, db)
		}
		for user, g := range won {
			r, err := env.Boards.Rank(ctx, a.ID, user)
			if err != nil || r.Strategy != sale.RankExact || len(r.Entries) != 1 {
				t.Fatalf("rank of %s: %+v, %v", user, r, err)
			}
			want, err := env.Store.(sale.LeaderStore).RankOf(ctx, g)
			if err != nil {
				t.Fatal(err)
			}
			if r.Entries[0].Rank != want || r.Entries[0].AmountCents != g.AmountCents {
				t.Fatalf("rank of %s: %+v, the database says %d", user, r.Entries[0], want)
			}
		}
		if _, err := env.Boards.Rank(ctx, a.ID, "nobody"); !errors.Is(err, sale.ErrNotFound) {
			t.Fatalf("rank of a user without a share: %v, want ErrNotFound", err)
		}
	})
	t.Run("ACancelledShareStaysOff", func(t *testing.T) {
		// A buyer cancels while the worker's report of the placement is still to come (its first
		// try failed, Redis failing over): the late report must not put the share back. And a
		// cancel whose removal from the board fails leaves the restock owed: given again, it
		// takes the share off.
		a := rain("cancelled rain", 10, 1_000)
		won := grabAll(t, env, a.ID, 10)
		env.Drain(a.ID)
		var users []string
		for u := range won {
			users = append(users, u)
		}
		sort.Strings(users)
		late, failed := users[0], users[1]
		placed, err := env.Service.Order(ctx, late, won[late].Token)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := env.Service.Cancel(ctx, late, won[late].Token); err != nil {
			t.Fatal(err)
		}
		if err := env.Boards.OrdersPlacedAgain(ctx, []sale.Placement{{Order: placed}}); err != nil {
			t.Fatal(err)
		}
		env.Faults.FailRankings(1)
		if _, err := env.Service.Cancel(ctx, failed, won[failed].Token); err != nil {
			t.Fatal(err)
		}
		onBoard := func() map[string]bool {
			board, err := env.Boards.Leaderboard(ctx, a.ID, sale.MaxBoard)
			if err != nil || board.Strategy != sale.RankExact {
				t.Fatalf("leaderboard: %+v, %v", board, err)
			}
			on := map[string]bool{}
			for _, e := range board.Entries {
				on[e.UserID] = true
			}
			return on
		}
		if on := onBoard(); on[late] || !on[failed] || len(on) != 9 {
			t.Fatalf("after a late report of a cancelled share and a removal that failed: %d on the board, %s %v, %s %v; want 9, the late one off, the failed one still on",
				len(on), late, on[late], failed, on[failed])
		}
		if n, err := env.Service.ReleaseOwed(ctx, 10); err != nil || n != 1 {
			t.Fatalf("owed restocks given = %d, %v; want the one whose removal failed", n, err)
		}
		if on := onBoard(); on[late] || on[failed] || len(on) != 8 {
			t.Fatalf("after the owed restock: %d on the board, want 8, neither cancelled share", len(on))
		}
	})
	t.Run("Approximate", func(t *testing.T) {
		a := rain("big rain", ExactMax+1_000, 10*(ExactMax+1_000))
		won := grabAll(t, env, a.ID, int(a.Stock))
		if int64(len(won)) != a.Stock {
			t.Fatalf("%d winners, want %d", len(won), a.Stock)
		}
		env.Drain(a.ID)
		board, err := env.Boards.Leaderboard(ctx, a.ID, 10)
		if err != nil || board.Strategy != sale.RankDatabase || len(board.Entries) != 10 {
			t.Fatalf("leaderboard of a histogram: %+v, %v; want the database's top 10", board, err)
		}
		n := 0
		for user, g := range won {
			if n++; n > 300 {
				break
			}
			r, err := env.Boards.Rank(ctx, a.ID, user)
			if err != nil || r.Strategy != sale.RankApprox {
				t.Fatalf("rank of %s: %+v, %v", user, r, err)
			}
			want, err := env.Store.(sale.LeaderStore).RankOf(ctx, g)
			if err != nil {
				t.Fatal(err)
			}
			if d := r.Entries[0].Rank - want; d > r.Bound || -d > r.Bound {
				t.Fatalf("rank of %s: %d ± %d, the database says %d", user, r.Entries[0].Rank, r.Bound, want)
			}
		}
	})
	t.Run("NotARedPacket", func(t *testing.T) {
		a, err := env.Service.CreateActivity(ctx, sale.Activity{Name: "item", Kind: sale.KindItem, Stock: 1,
			StartAt: start, EndAt: start.Add(time.Hour), PayWindow: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := env.Boards.Leaderboard(ctx, a.ID, 10); !errors.Is(err, sale.ErrNotFound) {
			t.Fatalf("leaderboard of an item: %v, want ErrNotFound", err)
		}
	})
}
