package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/redistest"
	"seckill/internal/sale"
	"seckill/internal/servers"
)

// shardedItem is an item whose stock of n units is split into shards counters.
func shardedItem(id string, n, shards, limit int64) sale.Activity {
	a := item(id, n, limit)
	a.StockShards = shards
	return a
}

// usersOf returns n user names whose home is shard home of shards.
func usersOf(n int, home, shards int64) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		if u := fmt.Sprint("user-", i); homeShard(u, shards) == home {
			out = append(out, u)
		}
	}
	return out
}

// clusterGate is a gate on a real three-master Redis Cluster.
func clusterGate(t *testing.T) (*Gate, redis.UniversalClient) {
	rdb := dial(t, redistest.StartCluster(t).Seeds())
	return New(rdb), rdb
}

// queueOf is a queue over the streams of acts.
func queueOf(rdb redis.UniversalClient, acts ...sale.Activity) *Queue {
	list := func(context.Context) ([]sale.Activity, error) { return acts, nil }
	return NewQueue(rdb, "node-1", list, time.Millisecond, time.Minute)
}

func TestShardedStockOnACluster(t *testing.T) {
	ctx := context.Background()
	g, rdb := clusterGate(t)
	t.Run("ShardsHaveSlotsOfTheirOwn", func(t *testing.T) {
		slots := map[int64]bool{}
		for i := range int64(3) {
			s, err := rdb.ClusterKeySlot(ctx, keysOf(ShardID("slots", i)).stock).Result()
			if err != nil {
				t.Fatal(err)
			}
			slots[s] = true
		}
		if len(slots) != 3 {
			t.Fatalf("three shards in %d slots", len(slots))
		}
	})

	t.Run("FallThroughFindsTheLastUnits", func(t *testing.T) {
		a := shardedItem("fall", 3, 3, 1) // a unit on each shard
		if err := g.Load(ctx, a, sale.GateState{}); err != nil {
			t.Fatal(err)
		}
		users := usersOf(4, 1, 3) // all at home on shard 1
		var won []sale.Grab
		for _, u := range users[:3] {
			gr, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: u, IdempotencyKey: "k", Now: a.StartAt})
			if err != nil {
				t.Fatalf("%s: %v; the units of the other shards must be found", u, err)
			}
			won = append(won, gr)
		}
		if _, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: users[3], Now: a.StartAt}); !errors.Is(err, sale.ErrSoldOut) {
			t.Fatalf("fourth grab: %v, want sold out", err)
		}
		// A buyer whose unit came from another shard cannot buy again: the hold is at home.
		if _, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: users[1], Now: a.StartAt}); !errors.Is(err, sale.ErrAlreadyBought) &&
			!errors.Is(err, sale.ErrSoldOut) {
			t.Fatalf("second grab of a buyer served from another shard: %v", err)
		}
		// A retry with the same key gets the first answer, wherever the unit came from.
		again, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: users[2], IdempotencyKey: "k", Now: a.StartAt})
		if err != nil || again.Token != won[2].Token {
			t.Fatalf("keyed retry: %+v, %v; want %s", again, err, won[2].Token)
		}
		if n, err := g.Remaining(ctx, a); err != nil || n != 0 {
			t.Fatalf("remaining = %d, %v", n, err)
		}
		q := queueOf(rdb, a)
		queued, err := q.Unacked(ctx, a)
		if err != nil || len(queued) != 3 {
			t.Fatalf("queued = %d grabs, %v; want 3 (one on each shard's stream)", len(queued), err)
		}
		for i := range int64(3) {
			if n := rdb.HLen(ctx, keysOf(ShardID(a.ID, i)).pending).Val(); n != 0 {
				t.Errorf("shard %d holds %d reservations after every grab settled", i, n)
			}
		}
		if p, err := q.Pending(ctx, won[1].Token); err != nil || p.ActivityID != a.ID || p.UserID != users[1] {
			t.Errorf("pending grab from another shard = %+v, %v", p, err)
		}

		// Cancelling the grab served from another shard gives its unit back there, and its
		// buyer's hold at home: they can buy again.
		if err := g.Release(ctx, a, won[1]); err != nil {
			t.Fatal(err)
		}
		if err := g.Release(ctx, a, won[1]); err != nil { // a second release changes nothing
			t.Fatal(err)
		}
		if n, _ := g.Remaining(ctx, a); n != 1 {
			t.Fatalf("remaining = %d after one release, want 1", n)
		}
		if _, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: users[1], Now: a.StartAt}); err != nil {
			t.Fatalf("the released buyer's new grab: %v", err)
		}
	})

	t.Run("Crowd", func(t *testing.T) {
		a := shardedItem("crowd", 100, 3, 1)
		if err := g.Load(ctx, a, sale.GateState{}); err != nil {
			t.Fatal(err)
		}
		const users = 400
		var mu sync.Mutex
		won := map[string]string{}
		var wg sync.WaitGroup
		for u := range users {
			for range 2 { // two clicks, one key
				wg.Go(func() {
					user := fmt.Sprint("c", u)
					gr, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: user, IdempotencyKey: "click", Now: a.StartAt})
					switch {
					case err == nil:
						mu.Lock()
						defer mu.Unlock()
						if first, ok := won[user]; ok && first != gr.Token {
							t.Errorf("%s won twice: %s and %s", user, first, gr.Token)
						}
						won[user] = gr.Token
					case errors.Is(err, sale.ErrSoldOut), errors.Is(err, sale.ErrBusy): // busy: the key's first click is still looking
					default:
						t.Errorf("%s: %v", user, err)
					}
				})
			}
		}
		wg.Wait()
		if len(won) != 100 {
			t.Fatalf("%d winners, want the stock (100)", len(won))
		}
		if n, _ := g.Remaining(ctx, a); n != 0 {
			t.Fatalf("remaining = %d", n)
		}
		if n, err := queueOf(rdb, a).Depth(ctx, a); err != nil || n != 100 {
			t.Fatalf("depth = %d, %v; want 100 over the three streams", n, err)
		}
	})

	t.Run("SettleAbandonedReservations", func(t *testing.T) {
		a := shardedItem("settle", 2, 2, 1) // a unit on each of two shards
		if err := g.Load(ctx, a, sale.GateState{}); err != nil {
			t.Fatal(err)
		}
		users := usersOf(3, 0, 2)
		if _, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: users[0], Now: a.StartAt}); err != nil {
			t.Fatal(err) // shard 0's unit
		}
		// users[1] reserves on shard 0 and its process dies before it looks further.
		reserve := func(user string) string {
			c := &call{req: sale.GrabRequest{ActivityID: a.ID, UserID: user, Now: a.StartAt}, token: sale.NewGrabToken(a.StartAt),
				done: make(chan struct{})}
			g.flush(a, ShardID(a.ID, 0), []*call{c})
			if !errors.Is(c.err, errReserved) {
				t.Fatalf("%s: %v, want a reservation", user, c.err)
			}
			return c.token
		}
		reserve(users[1])
		if _, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: users[1], Now: a.StartAt}); !errors.Is(err, sale.ErrAlreadyBought) {
			t.Fatalf("grab while reserved: %v, want already bought (the reservation holds the limit)", err)
		}
		if n, err := g.Settle(ctx, []sale.Activity{a}, time.Minute, a.StartAt.Add(30*time.Second)); err != nil || n != 0 {
			t.Fatalf("settle of a fresh reservation = %d, %v; want it left alone", n, err)
		}
		if n, err := g.Settle(ctx, []sale.Activity{a}, time.Minute, a.StartAt.Add(2*time.Minute)); err != nil || n != 1 {
			t.Fatalf("settle = %d, %v; want the reservation given back", n, err)
		}
		if _, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: users[1], Now: a.StartAt}); err != nil {
			t.Fatalf("grab after the reservation was given back: %v (shard 1 has a unit)", err)
		}

		// On a fresh activity, users[2] reserves on shard 0, takes shard 1's unit...
		b := shardedItem("settle2", 2, 2, 1)
		if err := g.Load(ctx, b, sale.GateState{}); err != nil {
			t.Fatal(err)
		}
		a = b // reserve works on a
		if _, err := g.Grab(ctx, b, sale.GrabRequest{ActivityID: b.ID, UserID: users[0], Now: b.StartAt}); err != nil {
			t.Fatal(err)
		}
		token := reserve(users[2])
		k := keysOf(ShardID(b.ID, 1))
		if res, err := takeScript.Run(ctx, rdb, []string{k.stock, k.grabs, k.stream},
			token, users[2], "", b.StartAt.UnixMilli(), b.PriceCents, b.ID).Slice(); err != nil || res[0] != int64(0) {
			t.Fatalf("take = %v, %v", res, err)
		}
		// ...and dies before settling: the sweeper finds the unit and settles the grab won.
		if n, err := g.Settle(ctx, []sale.Activity{b}, time.Minute, b.StartAt.Add(2*time.Minute)); err != nil || n != 1 {
			t.Fatalf("settle = %d, %v", n, err)
		}
		if _, err := g.Grab(ctx, b, sale.GrabRequest{ActivityID: b.ID, UserID: users[2], Now: b.StartAt}); !errors.Is(err, sale.ErrAlreadyBought) {
			t.Fatalf("grab of a settled winner: %v, want already bought", err)
		}
		if gr, err := queueOf(rdb, b).Pending(ctx, token); err != nil || gr.UserID != users[2] || gr.ActivityID != b.ID {
			t.Fatalf("the settled grab on its way: %+v, %v", gr, err)
		}
	})

	t.Run("ASoldOutCrowdReservesNothingOnceTheShardsAreKnownEmpty", func(t *testing.T) {
		// Once this node found the other shards empty, a grab out of units at home is told sold
		// out by grab.lua alone: no reservation, no home.lua to give it back. A unit this node
		// gives back on another shard is found again at once.
		a := shardedItem("known-empty", 3, 3, 1) // a unit on each shard
		if err := g.Load(ctx, a, sale.GateState{}); err != nil {
			t.Fatal(err)
		}
		users := usersOf(9, 1, 3) // all at home on shard 1
		var won []sale.Grab
		for _, u := range users[:3] {
			gr, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: u, Now: a.StartAt})
			if err != nil {
				t.Fatal(err)
			}
			won = append(won, gr)
		}
		if _, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: users[3], Now: a.StartAt}); !errors.Is(err, sale.ErrSoldOut) {
			t.Fatalf("the first grab after the last unit: %v, want sold out", err) // it fell through, marking the others empty
		}
		home, err := rdb.(*redis.ClusterClient).MasterForKey(ctx, keysOf(ShardID(a.ID, 1)).stock)
		if err != nil {
			t.Fatal(err)
		}
		scripts := func() int64 { // the script calls the home shard's master has run
			info := home.Info(ctx, "commandstats").Val()
			var n int64
			for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls="} {
				if _, rest, ok := strings.Cut(info, cmd); ok {
					v, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
					n += v
				}
			}
			return n
		}
		before := scripts()
		if _, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: users[4], IdempotencyKey: "k", Now: a.StartAt}); !errors.Is(err, sale.ErrSoldOut) {
			t.Fatalf("a grab with the others known empty: %v, want sold out", err)
		}
		if n := scripts() - before; n != 1 {
			t.Fatalf("a sold-out grab with the others known empty ran %d scripts on its home shard, want 1 (grab.lua alone)", n)
		}
		if n := rdb.HLen(ctx, keysOf(ShardID(a.ID, 1)).pending).Val(); n != 0 {
			t.Fatalf("%d reservations left on the home shard", n)
		}
		// The findings lapse: the next batch reads the other shards' stock again, finds them still
		// empty, and its grab is told sold out by grab.lua alone again. (Before lookAgain, every
		// grab that came then reserved, fell through and gave the reservation back: on a starved
		// machine those piled up, one cause of a click waiting 0.95 s in the nemesis's Cluster
		// seed 170.)
		time.Sleep(emptyFor + 50*time.Millisecond)
		before = scripts()
		if _, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: users[4], IdempotencyKey: "k2", Now: a.StartAt}); !errors.Is(err, sale.ErrSoldOut) {
			t.Fatalf("a grab once the marks lapsed: %v, want sold out", err)
		}
		if n := scripts() - before; n != 1 {
			t.Fatalf("a sold-out grab once the marks lapsed ran %d scripts on its home shard, want 1 (grab.lua alone)", n)
		}
		// The unit of shard 0 comes back (this node's release counts it): of a batch of three grabs
		// out of units at home, one reserves and finds it, the other two are told sold out in
		// the batch's call, with nothing reserved. (Before, the release cleared the mark, and every
		// grab until a fall-through found shard 0 empty again reserved and fell through: the
		// nemesis's Cluster seed 188, a crowd's clicks waiting a second for one unit.)
		var from0 sale.Grab
		for _, gr := range won {
			if shard, _ := rdb.HGet(ctx, keysOf(ShardID(a.ID, 1)).away, gr.Token).Result(); strings.HasPrefix(shard, "0") {
				from0 = gr
			}
		}
		if from0.Token == "" {
			t.Fatal("no unit came from shard 0")
		}
		if err := g.Release(ctx, a, from0); err != nil {
			t.Fatal(err)
		}
		var batch []*call
		for _, u := range users[5:] {
			batch = append(batch, &call{req: sale.GrabRequest{ActivityID: a.ID, UserID: u, Now: a.StartAt},
				token: sale.NewGrabToken(a.StartAt), done: make(chan struct{})})
		}
		g.flush(a, ShardID(a.ID, 1), batch)
		var reserved *call
		for _, c := range batch {
			switch {
			case errors.Is(c.err, errReserved) && reserved == nil:
				reserved = c
			case errors.Is(c.err, sale.ErrSoldOut):
			default:
				t.Fatalf("%s: %v; want one reservation (one unit is known on the other shards) and the rest sold out", c.req.UserID, c.err)
			}
		}
		if reserved == nil {
			t.Fatal("no grab reserved: the unit given back on shard 0 is not found")
		}
		if n := rdb.HLen(ctx, keysOf(ShardID(a.ID, 1)).pending).Val(); n != 1 {
			t.Fatalf("%d reservations on the home shard, want the one", n)
		}
		if gr, err := g.fallThrough(a, 1, reserved.req, reserved.token, ""); err != nil || gr.Token != reserved.token {
			t.Fatalf("the reserved grab's fall-through: %+v, %v; want shard 0's unit", gr, err)
		}
		if n, _ := g.Remaining(ctx, a); n != 0 {
			t.Fatalf("remaining = %d, want 0", n)
		}
		// Stock added (on shard 0): what this node found of the shards for the old stock is void,
		// and a grab out of units at home finds the unit.
		b := a
		b.Revision, b.Stock = max(a.Revision, 1)+1, a.Stock+1
		if err := g.Revise(ctx, b, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Grab(ctx, b, sale.GrabRequest{ActivityID: b.ID, UserID: users[8], Now: b.StartAt}); err != nil {
			t.Fatalf("a grab after a unit was added on shard 0: %v, want won", err)
		}
	})

	t.Run("AKeyedRepeatResumesAnAbandonedReservation", func(t *testing.T) {
		// A grab with a key reserved on its home shard and gave up (Redis failed its fall-through);
		// its repeat, once the reservation is ResumeAfter old, settles it itself instead of
		// answering busy until the sweeper comes: on to the other shard's unit, or, when that
		// shard gave it already, won with that unit and no other taken.
		for _, took := range []bool{false, true} {
			a := shardedItem(fmt.Sprint("resume-", took), 2, 2, 1) // a unit on each of two shards
			if err := g.Load(ctx, a, sale.GateState{}); err != nil {
				t.Fatal(err)
			}
			users := usersOf(2, 0, 2)
			if _, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: users[0], Now: a.StartAt}); err != nil {
				t.Fatal(err) // shard 0's unit
			}
			reserve := func(at time.Time, key string) string {
				c := &call{req: sale.GrabRequest{ActivityID: a.ID, UserID: users[1], IdempotencyKey: key, Now: at},
					token: sale.NewGrabToken(at), done: make(chan struct{})}
				g.flush(a, ShardID(a.ID, 0), []*call{c})
				if !errors.Is(c.err, errReserved) {
					t.Fatalf("%v, want a reservation", c.err)
				}
				return c.token
			}
			reserve(a.StartAt, "young")
			repeat := sale.GrabRequest{ActivityID: a.ID, UserID: users[1], IdempotencyKey: "young", Now: a.StartAt.Add(time.Second)}
			if _, err := g.Grab(ctx, a, repeat); !errors.Is(err, sale.ErrInProgress) || !errors.Is(err, sale.ErrBusy) {
				t.Fatalf("took %v: a repeat of a reservation just made: %v, want busy, in progress (its grab may still be looking)", took, err)
			}
			// Its caller's deadline near, the repeat says so before it passes: a guard that gave up
			// on it would count Redis as failing.
			dl, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			_, err := g.Grab(dl, a, repeat)
			late := dl.Err()
			cancel()
			if !errors.Is(err, sale.ErrInProgress) || !sale.IsVerdict(err) || late != nil {
				t.Fatalf("took %v: a repeat with 300 ms left: %v (deadline: %v), want in progress, a verdict, in time", took, err, late)
			}
			if n, err := g.Settle(ctx, []sale.Activity{a}, 0, a.StartAt.Add(time.Minute)); err != nil || n != 1 {
				t.Fatalf("settle the young reservation = %d, %v", n, err) // given back: shard 1's unit is still there
			}
			token := reserve(a.StartAt, "old")
			k := keysOf(ShardID(a.ID, 1))
			if took {
				if res, err := takeScript.Run(ctx, rdb, []string{k.stock, k.grabs, k.stream},
					token, users[1], "old", a.StartAt.UnixMilli(), a.PriceCents, a.ID).Slice(); err != nil || res[0] != int64(0) {
					t.Fatalf("take = %v, %v", res, err)
				}
			}
			repeat.IdempotencyKey, repeat.Now = "old", a.StartAt.Add(ResumeAfter+time.Second)
			gr, err := g.Grab(ctx, a, repeat)
			if err != nil || gr.Token != token {
				t.Fatalf("took %v: the repeat of an abandoned reservation: %+v, %v; want won with its token %s", took, gr, err, token)
			}
			if n, err := rdb.Get(ctx, k.stock).Int64(); err != nil || n != 0 {
				t.Fatalf("took %v: shard 1 holds %d units (%v), want 0: one unit for the grab", took, n, err)
			}
			if again, err := g.Grab(ctx, a, repeat); err != nil || again.Token != token {
				t.Fatalf("took %v: the key once more: %+v, %v; want the same answer", took, again, err)
			}
			if n, err := g.Settle(ctx, []sale.Activity{a}, 0, a.StartAt.Add(time.Minute)); err != nil || n != 0 {
				t.Fatalf("took %v: the sweeper after the repeat settled %d (%v), want nothing left", took, n, err)
			}
		}
	})

	t.Run("LoadSpreadsTheStockAndKeepsTheHoldingsAtHome", func(t *testing.T) {
		a := shardedItem("load", 10, 3, 1)
		held := []sale.Grab{{Token: "g1", ActivityID: a.ID, UserID: "h1", At: a.StartAt},
			{Token: "g2", ActivityID: a.ID, UserID: "h2", IdempotencyKey: "k", At: a.StartAt}}
		if err := g.Load(ctx, a, sale.GateState{Held: held, Keyed: held[1:]}); err != nil {
			t.Fatal(err)
		}
		if n, err := g.Remaining(ctx, a); err != nil || n != 8 {
			t.Fatalf("remaining = %d, %v; want 8", n, err)
		}
		for i := range int64(3) {
			n, _ := rdb.Get(ctx, keysOf(ShardID(a.ID, i)).stock).Int64()
			if n < 2 || n > 3 {
				t.Errorf("shard %d holds %d of 8 units; want them spread (2 or 3 each)", i, n)
			}
		}
		if _, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: "h1", Now: a.StartAt}); !errors.Is(err, sale.ErrAlreadyBought) {
			t.Fatalf("a loaded holder's grab: %v, want already bought", err)
		}
		if gr, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: "h2", IdempotencyKey: "k", Now: a.StartAt}); err != nil || gr.Token != "g2" {
			t.Fatalf("a loaded keyed grab's retry: %+v, %v; want g2", gr, err)
		}
	})
}

// TestWarmNeverResetsASellingShard: a node loads a sharded stock while another, slower node
// found it absent a moment before. The slow one comes once the first has written shards 2 and 1
// and grabs are selling there, shard 0 not written yet: it must not write over them (before, it
// rewrote every shard but 0 without a check, and the units sold there came back).
func TestWarmNeverResetsASellingShard(t *testing.T) {
	ctx := context.Background()
	first, rdb := clusterGate(t)
	slow := New(rdb)
	a := shardedItem("race", 30, 3, 1)
	if err := first.Load(ctx, a, sale.GateState{}); err != nil {
		t.Fatal(err)
	}
	for _, home := range []int64{1, 2} {
		for _, u := range usersOf(3, home, 3) {
			if _, err := first.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: u, Now: a.StartAt}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// As if the first node were still to write shard 0.
	k0 := keysOf(a.ID)
	saved, err := rdb.Get(ctx, k0.stock).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Del(ctx, k0.stock).Err(); err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(200 * time.Millisecond); rdb.Set(ctx, k0.stock, saved, 0) }() // the first node finishes
	if _, err := slow.Warm(ctx, a, sale.GateState{}); err != nil {
		t.Fatal(err)
	}
	for _, home := range []int64{1, 2} {
		k := keysOf(ShardID(a.ID, home))
		if n, _ := rdb.Get(ctx, k.stock).Int64(); n != 7 {
			t.Errorf("shard %d has %d units after the slow node's warm, want the 7 the first left", home, n)
		}
		if n, _ := rdb.HLen(ctx, k.grabs).Result(); n != 3 {
			t.Errorf("shard %d holds %d grabs after the slow node's warm, want its 3", home, n)
		}
	}
	if n, err := first.Remaining(ctx, a); err != nil || n != 24 {
		t.Fatalf("remaining %d, %v after the warm, want 24: nothing sold came back", n, err)
	}
}

// TestQueueCountsEveryShardWhenTheFirstIsLost: the master of a sharded item's first shard is
// killed and comes back empty, with the record of how many shards there are. The queue still
// counts and lists the grabs waiting on the other shards' streams: they are the activity's own
// shards, not what the cache remembers (the archive waits for them, a rebuild counts them held).
func TestQueueCountsEveryShardWhenTheFirstIsLost(t *testing.T) {
	ctx := context.Background()
	cluster := redistest.StartCluster(t)
	rdb := dial(t, cluster.Seeds())
	g := New(rdb)
	master := func(key string) int { return cluster.MasterOfKey(t, key) }
	var a sale.Activity
	first, elsewhere := -1, 0
	for i := 0; elsewhere == 0; i++ {
		if i == 50 {
			t.Fatal("50 activities, each with its shards on one master")
		}
		a = shardedItem(fmt.Sprint("depth", i), 30, 3, 1)
		first, elsewhere = master(StreamKey(a.ID)), 0
		for j := int64(1); j < 3; j++ {
			if master(StreamKey(ShardID(a.ID, j))) != first {
				elsewhere++
			}
		}
	}
	if err := g.Load(ctx, a, sale.GateState{}); err != nil {
		t.Fatal(err)
	}
	survive := 0 // grabs on the streams of shards away from the first's master
	for home := range int64(3) {
		for _, u := range usersOf(2, home, 3) {
			if _, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: u, Now: a.StartAt}); err != nil {
				t.Fatal(err)
			}
			if master(StreamKey(ShardID(a.ID, home))) != first {
				survive++
			}
		}
	}
	q := queueOf(rdb, a)
	if n, err := q.Depth(ctx, a); err != nil || n != 6 {
		t.Fatalf("depth before the loss = %d, %v; want 6", n, err)
	}

	cluster.Node(first).Kill()
	cluster.Node(first).Restart(t)
	cluster.WaitOK(t)
	var n int64
	var err error
	for try := 0; try < 20; try++ { // the client's connections to the restarted master are broken at first
		if n, err = q.Depth(ctx, a); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || n != int64(survive) {
		t.Fatalf("depth after the first shard's master came back empty = %d, %v; want the %d grabs on the other shards", n, err, survive)
	}
	if gs, err := q.Unacked(ctx, a); err != nil || len(gs) != survive {
		t.Fatalf("unacked after the loss: %d grabs, %v; want %d", len(gs), err, survive)
	}
}

// TestDropForgetsEveryLane: the lanes the grabs of a sharded item queue in, one per shard and
// revision, all go when the item is dropped (archived); a gate that ran many sales keeps none of
// theirs.
func TestDropForgetsEveryLane(t *testing.T) {
	ctx := context.Background()
	g := New(dial(t, redistest.Start(t, redistest.Options{}).URL()))
	a := shardedItem("lanes", 30, 3, 1)
	if err := g.Load(ctx, a, sale.GateState{}); err != nil {
		t.Fatal(err)
	}
	for home := range int64(3) {
		for _, u := range usersOf(2, home, 3) {
			if _, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: u, Now: a.StartAt}); err != nil {
				t.Fatal(err)
			}
		}
	}
	lanes := func() (n int) {
		g.lanes.Range(func(any, any) bool { n++; return true })
		return n
	}
	if n := lanes(); n != 3 {
		t.Fatalf("%d lanes after grabs homed on each of 3 shards, want 3", n)
	}
	if err := g.Drop(ctx, a); err != nil {
		t.Fatal(err)
	}
	if n := lanes(); n != 0 {
		t.Fatalf("%d lanes left after the drop, want 0", n)
	}
}

// TestAFallThroughWaitsOutAFailover: a grab out of units at home falls through to a shard whose
// master was just killed -9. Its step there is refused without running while the replica takes
// over, and the fall-through sends it again, to the same shard, until the new master takes it:
// the grab is won by its own fall-through, which its repeats find, not left in progress for a
// repeat to resume ResumeAfter later (Cluster seed 1 of the nemesis found the key busy for 6 s
// after a failover). Its caller, whose deadline comes first, is answered in progress before it:
// a call left to its deadline would count as Redis failing (it opened breakers, seeds 2 and 5).
func TestAFallThroughWaitsOutAFailover(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartClusterWith(t, servers.ClusterOptions{Replicas: 1, NodeTimeout: time.Second})
	rdb := dial(t, c.Seeds())
	g := New(rdb)
	var a sale.Activity
	for i := 0; ; i++ { // shards 0 and 1 on different masters
		a = shardedItem(fmt.Sprint("failover-", i), 2, 2, 1)
		if c.MasterOfKey(t, keysOf(ShardID(a.ID, 0)).stock) != c.MasterOfKey(t, keysOf(ShardID(a.ID, 1)).stock) {
			break
		}
	}
	if err := g.Load(ctx, a, sale.GateState{}); err != nil {
		t.Fatal(err)
	}
	users := usersOf(2, 0, 2)
	if _, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: users[0], Now: a.StartAt}); err != nil {
		t.Fatal(err) // shard 0's unit
	}
	k := keysOf(ShardID(a.ID, 1))
	master := c.MasterOfKey(t, k.stock)
	waitReplicated(t, c.Node(master).Addr()) // the replica promoted must have shard 1's unit
	c.Node(master).Kill()
	began := time.Now()
	// A caller whose deadline comes first is answered before it, in progress (busy for the
	// client, the gate's answer for a breaker), while the fall-through goes on.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := g.Grab(short, a, sale.GrabRequest{ActivityID: a.ID, UserID: users[1], IdempotencyKey: "k", Now: a.StartAt})
	late := short.Err()
	cancel()
	if !errors.Is(err, sale.ErrInProgress) || !sale.IsVerdict(err) || late != nil {
		t.Fatalf("a grab with 300 ms to go, falling through to a shard failing over: %v (deadline: %v); want in progress, in time", err, late)
	}
	gctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var gr sale.Grab
	// Its repeats: busy while the cluster is down (for the node's guard, a topology event) and in
	// progress until the fall-through has settled the grab, then its answer.
	for gr.Token == "" {
		gr, err = g.Grab(gctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: users[1], IdempotencyKey: "k", Now: a.StartAt})
		if err != nil && (!errors.Is(err, sale.ErrBusy) || gctx.Err() != nil) {
			t.Fatalf("a repeat of a grab falling through a failover: %+v, %v (after %v); want shard 1's unit",
				gr, err, time.Since(began).Round(time.Millisecond))
		}
		if err != nil {
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Logf("won through the failover in %v", time.Since(began).Round(time.Millisecond))
	if n, err := rdb.Get(ctx, k.stock).Int64(); err != nil || n != 0 {
		t.Fatalf("shard 1 holds %d units (%v) after the grab, want 0", n, err)
	}
	again, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: users[1], IdempotencyKey: "k", Now: a.StartAt})
	if err != nil || again.Token != gr.Token {
		t.Fatalf("the key once more: %+v, %v; want its answer, %s", again, err, gr.Token)
	}
}

// waitReplicated waits until every replica of the master at addr has all it wrote.
func waitReplicated(t *testing.T, addr string) {
	t.Helper()
	field := func(info, name string) int64 {
		_, v, _ := strings.Cut(info, name)
		n, _ := strconv.ParseInt(strings.TrimSpace(strings.SplitN(strings.SplitN(v, "\r\n", 2)[0], ",", 2)[0]), 10, 64)
		return n
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		info, err := servers.RedisCommand(addr, "INFO", "replication")
		if err == nil && strings.Contains(info, "slave0:") && field(info, ",offset=") >= field(info, "master_repl_offset:") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replicas of %s did not catch up in 10 s: %v\n%s", addr, err, info)
		}
	}
}

// TestSeenUnits: what a node found of a sharded item's shards, counted on from there, and made
// void by stock added; a finding that could not be looked at again stands another while.
func TestSeenUnits(t *testing.T) {
	a := shardedItem("seen", 9, 3, 1)
	var u seenUnits
	now := time.Now()
	home, one, two := ShardID(a.ID, 0), ShardID(a.ID, 1), ShardID(a.ID, 2)
	if _, known, _ := u.others(a, home, now); known {
		t.Fatal("nothing found yet, and the others are known")
	}
	u.gaveBack(one) // a shard never found stays unknown
	u.found(a, one, 0, now)
	if _, known, _ := u.others(a, home, now); known {
		t.Fatal("one of two others found, and they are known")
	}
	u.found(a, two, 2, now)
	if n, known, lapsed := u.others(a, home, now); n != 2 || !known || lapsed {
		t.Fatalf("others = %d, %v, %v; want 2 units, known, fresh", n, known, lapsed)
	}
	if !u.empty(a, one, now) || u.empty(a, two, now) {
		t.Fatal("shard 1 is empty, shard 2 is not")
	}
	u.gaveBack(one)
	u.took(two)
	u.took(two)
	u.took(two) // never below none
	if n, _, _ := u.others(a, home, now); n != 1 || u.empty(a, one, now) || !u.empty(a, two, now) {
		t.Fatalf("after a unit given back on 1 and two taken on 2: %d units; want 1, on shard 1", n)
	}
	later := now.Add(emptyFor)
	if _, known, lapsed := u.others(a, home, later); !known || !lapsed || len(u.lapsed(a, later)) != 2 {
		t.Fatalf("emptyFor later: known %v, lapsed %v, %v; want both lapsed, still known", known, lapsed, u.lapsed(a, later))
	}
	if u.empty(a, two, later) {
		t.Fatal("a lapsed finding still skips its shard")
	}
	u.stand(two, later)
	if got := u.lapsed(a, later); len(got) != 1 || got[0] != one {
		t.Fatalf("lapsed after shard 2's finding stood: %v, want shard 1 only", got)
	}
	added := a
	added.Stock++
	if _, known, _ := u.others(added, home, now); known || u.empty(added, two, now) || len(u.lapsed(added, later)) != 0 {
		t.Fatal("stock added, and the findings for the old stock still count")
	}
	u.forget(one)
	if _, known, _ := u.others(a, home, now); known {
		t.Fatal("a shard forgotten, and the others are known")
	}
}
