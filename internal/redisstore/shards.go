package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/sale"
)

var (
	//go:embed take.lua
	takeLua    string
	takeScript = redis.NewScript(takeLua)

	//go:embed home.lua
	homeLua    string
	homeScript = redis.NewScript(homeLua)
)

// This file holds the steps a grab takes only on a sharded stock: the user's home shard, the
// fall-through to the other shards, the settling of the reservation on the home shard, and the
// sweeper (Settle) that settles the reservations left behind.
//
// Sharded stock. An item so hot that one Redis core cannot take its crowd splits its stock into
// StockShards counters, each with the keys of an activity of its own in a slot of its own:
// shard 0 is the activity's own keys, shard i the keys of the id "ID/i" (no activity id has a
// '/'; see keys.go). Every user has a home shard, which holds their holdings and idempotent
// answers, and where their grabs go first; when the home shard is out of units, grab.lua reserves
// the user's unit there, take.lua takes a unit from the next shard that has one (its grab record
// and its stream entry live on that shard), and home.lua settles the reservation: won, or nothing
// anywhere (sold out). The per-user limit is the home shard's count, reservations included, so a
// user cannot buy twice by falling through; a grab falls through every other shard before it is
// told sold out, so the last units are found. Only an item's stock is sharded (sale refuses
// StockShards > 1 for other kinds).
//
// The fall-through. A grab reserved on its home shard (grab.lua's answer 2) is recorded there in
// the pending hash, and a keyed grab's answer says that it is still looking. fallThrough asks
// take.lua on each other shard in turn, from the one after the home, on a context of its own
// (batchTimeout): the grab is won once a shard has given the unit, its stream entry written with
// it, and home.lua "took" then moves the reservation to the home shard's away hash (which shard
// gave the unit) and stores the answer. When no shard has a unit, home.lua "none" gives the
// reservation back and the grab is told sold out. A shard found empty (or not loaded) is skipped
// by this node's grabs for emptyFor; this node's own releases clear the mark at once. With every
// other shard so marked, the grabs out of units at home are told sold out by grab.lua itself,
// with nothing reserved (othersEmpty): one coalesced call, as an unsharded item's crowd; once
// their marks lapse, the next batch reads their stock first and marks them again (lookAgain),
// rather than every grab reserving and falling through to find them still empty. A repeat
// of the key of a grab still looking waits a little for its answer (milliseconds, as a rule), then
// says busy: a retry gets it. A step a failover or a slot moving refused without running it is
// sent again (again), to the same shard, within the fall-through's own deadline; a grab that gave
// up half-way all the same (Redis failed a step otherwise, or for longer) leaves its key busy
// until a repeat finds the reservation ResumeAfter old and finishes the fall-through itself
// (resume), with the grab's own token.
//
// Settling. home.lua's operations each happen once however often they run, so the grab (which
// tries again a few times when Redis fails it), the sweeper on any number of nodes and two
// releases can race. A reservation the grab did not settle (its process died, or Redis failed
// it, between the steps) stands, holding the user's limit as the settled grab would, until
// Settle finds it: won if a shard holds the grab's record, given back otherwise.
//
// Release. A grab of a sharded stock holds its unit on its home shard, or on the shard it took it
// from (the home shard's away hash says which): Release gives the unit back where it was taken
// (release.lua "unit") and the hold where the user's holdings are (home.lua "release").
//
// Loading. A load splits what is left evenly over the shards and puts each user's holdings,
// records and answers on their home shard (prepare); shard 0 is written last and carries the
// number of shards, which the queue reads to find the shards' streams. A shard lost from a loaded
// activity comes back with its users' state and no units (Warm), and Repair corrects the total
// on shard 0, taking units too many from the other shards when shard 0 has too few (load.go).

// homeShard is the shard of user's holdings and answers.
func homeShard(user string, shards int64) int64 {
	if shards <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(user))
	return int64(h.Sum32() % uint32(shards))
}

// othersEmpty reports whether this node found every shard of a but home (a shard's id) empty
// within emptyFor: a grab out of units on home would fall through them all, skipping each, and
// give its reservation back. grab.lua then answers it sold out at once, without the reservation
// and its release, two writes each waiting for the replicas: a sold-out crowd of a sharded item
// costs one coalesced call a batch instead of three calls a grab.
func (g *Gate) othersEmpty(a sale.Activity, home string) bool {
	now := time.Now().UnixNano()
	for i := range shardsOf(a) {
		id := ShardID(a.ID, i)
		if id == home {
			continue
		}
		if until, ok := g.empty.Load(id); !ok || now >= until.(int64) {
			return false
		}
	}
	return true
}

// lookAgain reads again, for a batch about to leave on shard home of a, the stock of every shard
// whose mark has lapsed, when every other shard was found empty before (none has had a unit
// given back on this node since): the shards still empty are marked again, and the batch's
// grabs out of units at home are told sold out in its one call (othersEmpty). Without it, every
// grab of a sold-out item's crowd that came once a mark lapsed reserved its unit, fell through
// each other shard and gave the reservation back, four calls in turn, each waiting for the
// replicas, until one of them marked the shards again: on a starved machine the fall-throughs
// outlasted the marks and piled up (one cause of a click waiting 0.95 s in the nemesis's Cluster
// seed 170; a mark a release clears sends the crowd falling through the same way, seed 188).
// One look per activity at a time on this node, the batches that need it waiting for it, bounded
// by emptyFor; a shard found with units, or not read (Redis failing, slow or moving), loses its
// mark, and the grabs fall through it as before, until a fall-through finds it empty again.
func (g *Gate) lookAgain(a sale.Activity, home string) {
	now := time.Now().UnixNano()
	lapsed := false
	for i := range shardsOf(a) {
		id := ShardID(a.ID, i)
		if id == home {
			continue
		}
		until, ok := g.empty.Load(id)
		if !ok {
			return // never found empty, or a unit came back there: it may have units
		}
		lapsed = lapsed || now >= until.(int64)
	}
	if !lapsed {
		return
	}
	g.looks.Do(a.ID, func() (any, error) {
		ctx, cancel := context.WithTimeout(context.Background(), emptyFor)
		defer cancel()
		now := time.Now().UnixNano()
		stocks := map[string]*redis.StringCmd{}
		_, err := g.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range shardsOf(a) {
				id := ShardID(a.ID, i)
				if until, ok := g.empty.Load(id); ok && now >= until.(int64) {
					stocks[id] = p.Get(ctx, keysOf(id).stock)
				}
			}
			return nil
		})
		until := time.Now().Add(emptyFor).UnixNano()
		for id, cmd := range stocks {
			left, cerr := cmd.Int64()
			switch {
			case err != nil && !errors.Is(err, redis.Nil):
				g.empty.Delete(id) // not read: no look again until a fall-through marks it
			case errors.Is(cerr, redis.Nil), cerr == nil && left <= 0: // not loaded, or out of units
				g.empty.Store(id, until)
			default:
				g.empty.Delete(id)
			}
		}
		return nil, nil
	})
}

// fallThrough looks for a unit for a grab reserved on its home shard, on each other shard in
// turn, and settles the reservation. The grab is won once a shard has given the unit (its
// stream entry is written with it); should the settling fail, the sweeper (Settle) finishes it.
// A failure before that leaves the reservation to the sweeper too, and answers ErrBusy.
func (g *Gate) fallThrough(a sale.Activity, home int64, r sale.GrabRequest, token, parent string) (sale.Grab, error) {
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	n := shardsOf(a)
	for step := int64(1); step < n; step++ {
		j := (home + step) % n
		id := ShardID(a.ID, j)
		if until, ok := g.empty.Load(id); ok && time.Now().UnixNano() < until.(int64) {
			continue
		}
		k := keysOf(id)
		var res []any
		var err error
		for attempt := 0; ; attempt++ {
			res, err = g.repl.runScript(ctx, g.rdb, g.grabs, takeScript, []string{k.stock, k.grabs, k.stream},
				token, r.UserID, r.IdempotencyKey, r.Now.UnixMilli(), a.PriceCents, a.ID, parent).Slice()
			// A step the topology refused without running it (the shard's master failing over,
			// its slot moving) is sent again, to the same shard: a step that may have run is
			// not, as the next shard could give a second unit for the grab.
			if err == nil || !g.again(ctx, err, false, attempt) {
				break
			}
		}
		if err != nil || len(res) != 2 {
			return sale.Grab{}, sale.Busy(err, "take a unit from shard %d of %s: %v", j, a.ID, res)
		}
		code, _ := res[0].(int64)
		rec, _ := res[1].(string)
		switch code {
		case 0, 1:
			// Won: the unit and the stream entry are written. A failure to settle leaves the
			// reservation standing, which holds the user's limit as the settled grab would, until
			// the sweeper (Settle) finds the unit and settles it.
			_ = g.home(ctx, a, home, "took", token, r.UserID, r.IdempotencyKey, j, rec)
			return parseRecord(a.ID, token, rec)
		case -5, -1: // nothing here (or not loaded: nothing to sell there either)
			g.empty.Store(id, time.Now().Add(emptyFor).UnixNano())
			continue
		default:
			return sale.Grab{}, fmt.Errorf("take a unit from shard %d of %s: script answered %v", j, a.ID, res)
		}
	}
	if err := g.home(ctx, a, home, "none", token, r.UserID, r.IdempotencyKey, 0, ""); err != nil {
		return sale.Grab{}, sale.Busy(err, "give back a reservation on %s", a.ID)
	}
	return sale.Grab{}, sale.ErrSoldOut
}

// ResumeAfter is how old a sharded stock's reservation must be before a repeat of its grab's key
// settles it itself (resume): its first grab gave up by then (every step of a fall-through is
// bounded by batchTimeout), so no step of it can race the repeat's.
const ResumeAfter = batchTimeout + time.Second

// resume settles, for a repeat of r's key, the reservation its first grab left standing on the
// home shard (Redis failed a step of its fall-through: a slot moving, a failover), once it is
// ResumeAfter old, rather than leaving the key busy until the sweeper (Settle) comes: won when a
// shard gave the token its unit, or else the fall-through goes on, with the same token, on the
// shards in turn. Younger, or settled meanwhile, the repeat is told busy, as before: its next
// retry gets the answer.
func (g *Gate) resume(caller context.Context, a sale.Activity, home int64, r sale.GrabRequest, parent string) (sale.Grab, error) {
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	pending, err := g.rdb.HGetAll(ctx, keysOf(ShardID(a.ID, home)).pending).Result()
	if err != nil {
		return sale.Grab{}, sale.Busy(err, "read the reservations of %s", a.ID)
	}
	for token, v := range pending {
		f := strings.Split(v, "\n")
		if len(f) != 3 || f[0] != r.UserID || f[1] != r.IdempotencyKey {
			continue
		}
		at, _ := strconv.ParseInt(f[2], 10, 64)
		if r.Now.Sub(time.UnixMilli(at)) < ResumeAfter {
			break
		}
		n := shardsOf(a)
		for j := range n { // a shard that gave the unit already: the grab was won
			if j == home {
				continue
			}
			rec, err := g.rdb.HGet(ctx, keysOf(ShardID(a.ID, j)).grabs, token).Result()
			if errors.Is(err, redis.Nil) {
				continue
			}
			if err != nil {
				return sale.Grab{}, sale.Busy(err, "look for grab %s", token)
			}
			if err := g.home(ctx, a, home, "took", token, r.UserID, r.IdempotencyKey, j, rec); err != nil {
				return sale.Grab{}, sale.Busy(err, "settle grab %s", token)
			}
			return parseRecord(a.ID, token, rec)
		}
		return answerBy(caller, a, token, func() (sale.Grab, error) { return g.fallThrough(a, home, r, token, parent) })
	}
	return sale.Grab{}, errInProgress
}

// home runs home.lua's op on shard home of a, trying again when Redis fails it (each op happens
// once however often it runs): a few times for a failure, and for as long as ctx lasts through a
// failover or a slot moving, since a reservation left standing holds its user's grabs busy
// until a repeat resumes it (ResumeAfter) or the sweeper comes.
func (g *Gate) home(ctx context.Context, a sale.Activity, home int64, op, token, user, key string, shard int64, rec string) error {
	k := keysOf(ShardID(a.ID, home))
	args := []any{op, token, user, key}
	if op == "took" {
		args = append(args, shard, rec)
	}
	var err error
	for attempt := 0; ; attempt++ {
		var n int64
		n, err = g.repl.runScript(ctx, g.rdb, g.grabs, homeScript, []string{k.held, k.answers, k.pending, k.away}, args...).Int64()
		if err == nil && n < 0 {
			return fmt.Errorf("home.lua %s answered %d", op, n)
		}
		if err == nil || !g.again(ctx, err, true, attempt) {
			return err
		}
	}
}

// again reports whether a step of a sharded grab that Redis failed with err is to be sent again,
// after a pause it sleeps, within ctx: one the topology refused without running (a failover, a
// slot moving) as long as ctx lasts; an idempotent one after any topology event too; an
// idempotent one after another failure for its first three tries.
func (g *Gate) again(ctx context.Context, err error, idempotent bool, attempt int) bool {
	moving, retry := g.topo.Classify(err)
	switch {
	case ctx.Err() != nil:
		return false
	case retry, idempotent && moving:
	case idempotent && attempt < 2:
	default:
		return false
	}
	pause := min(time.Duration(attempt+1)*10*time.Millisecond, 200*time.Millisecond)
	select {
	case <-ctx.Done():
		return false
	case <-time.After(pause):
		return true
	}
}

// Settle finishes the reservations of the sharded stocks among acts that were left behind for
// longer than olderThan (their grab's process died, or Redis failed it, between reserving and
// settling): a grab whose unit a shard gave is settled won, the others give their reservation
// back. It returns how many it settled. Run it now and then on one node or many (each settling
// is done once); olderThan must be well above the longest a grab can take (batchTimeout).
func (g *Gate) Settle(ctx context.Context, acts []sale.Activity, olderThan time.Duration, now time.Time) (int, error) {
	settled := 0
	for _, a := range acts {
		n := shardsOf(a)
		if n == 1 {
			continue
		}
		for h := range n {
			pending, err := g.rdb.HGetAll(ctx, keysOf(ShardID(a.ID, h)).pending).Result()
			if err != nil {
				return settled, sale.Busy(err, "read the reservations of %s", a.ID)
			}
			for token, v := range pending {
				f := strings.Split(v, "\n")
				if len(f) != 3 {
					continue
				}
				at, _ := strconv.ParseInt(f[2], 10, 64)
				if now.Sub(time.UnixMilli(at)) < olderThan {
					continue
				}
				op, shard, rec := "none", int64(0), ""
				for j := range n {
					if j == h {
						continue
					}
					r, err := g.rdb.HGet(ctx, keysOf(ShardID(a.ID, j)).grabs, token).Result()
					if errors.Is(err, redis.Nil) {
						continue
					}
					if err != nil {
						return settled, sale.Busy(err, "look for grab %s", token)
					}
					op, shard, rec = "took", j, r
					break
				}
				if err := g.home(ctx, a, h, op, token, f[0], f[1], shard, rec); err != nil {
					return settled, sale.Busy(err, "settle grab %s", token)
				}
				settled++
			}
		}
	}
	return settled, nil
}
