package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
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
// reservation back and the grab is told sold out. The node remembers how many units it found
// on each shard (seenUnits, counting the units it takes and gives back since, looked at again
// once emptyFor old): a shard found empty is skipped by its grabs, and once every other shard was found, a
// batch lets only as many of its grabs out of units at home reserve as the others hold, grab.lua
// telling the rest sold out in the batch's one call, with nothing reserved; a sold-out crowd
// costs one coalesced call a batch, as an unsharded item's. Once a finding lapses, the next batch
// reads the stock again first (lookAgain), rather than every grab reserving and falling through
// to find the shards still empty, or one unit for the crowd. A repeat
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

// seenUnits is what a node last found of the units of sharded stocks' shards: by a fall-through
// (a shard empty) or a look (lookAgain), and counted on from there (a unit this node gave back,
// or took). A finding stands for the stock the item had when it was made
// (stock added goes to shard 0, and makes every finding of the item void), and is looked at again
// once it is emptyFor old: units another node gives back are found that soon.
type seenUnits struct {
	mu sync.Mutex
	m  map[string]seen // shard id -> what was found
}

type seen struct {
	left  int64 // units the shard held, as far as this node knows
	until int64 // Unix ns: looked at again from then on
	stock int64 // the item's stock when it was found
}

// found records that shard id of a held left units at now.
func (u *seenUnits) found(a sale.Activity, id string, left int64, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[string]seen{}
	}
	u.m[id] = seen{max(left, 0), now.Add(emptyFor).UnixNano(), a.Stock}
}

// gaveBack counts a unit this node gave back to shard id; took, one it took there. Neither says
// anything of a shard never found: it may hold any number.
func (u *seenUnits) gaveBack(id string) { u.count(id, 1) }
func (u *seenUnits) took(id string)     { u.count(id, -1) }

func (u *seenUnits) count(id string, n int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if s, ok := u.m[id]; ok {
		s.left = max(s.left+n, 0)
		u.m[id] = s
	}
}

// forget drops what was found of shard id: it may hold any number of units.
func (u *seenUnits) forget(id string) {
	u.mu.Lock()
	delete(u.m, id)
	u.mu.Unlock()
}

// empty reports whether shard id of a was found out of units within emptyFor of now: a grab
// falling through skips it.
func (u *seenUnits) empty(a sale.Activity, id string, now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	s, ok := u.m[id]
	return ok && s.stock == a.Stock && now.UnixNano() < s.until && s.left == 0
}

// others reports, for a grab at home on shard home of a, the units every other shard holds as
// far as this node knows: known says each of them was found for a's stock, lapsed that some
// finding is emptyFor old.
func (u *seenUnits) others(a sale.Activity, home string, now time.Time) (units int64, known, lapsed bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for i := range shardsOf(a) {
		id := ShardID(a.ID, i)
		if id == home {
			continue
		}
		s, ok := u.m[id]
		if !ok || s.stock != a.Stock {
			return 0, false, false
		}
		units += s.left
		lapsed = lapsed || now.UnixNano() >= s.until
	}
	return units, true, lapsed
}

// lapsed returns the shards of a whose finding for a's stock is emptyFor old at now.
func (u *seenUnits) lapsed(a sale.Activity, now time.Time) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var ids []string
	for i := range shardsOf(a) {
		id := ShardID(a.ID, i)
		if s, ok := u.m[id]; ok && s.stock == a.Stock && now.UnixNano() >= s.until {
			ids = append(ids, id)
		}
	}
	return ids
}

// stand keeps the finding of shard id as it was for another emptyFor from now: it could not be
// looked at again.
func (u *seenUnits) stand(id string, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if s, ok := u.m[id]; ok {
		s.until = now.Add(emptyFor).UnixNano()
		u.m[id] = s
	}
}

// lookAgain reads again the stock of a's shards whose finding has lapsed, for a batch about to
// leave on one of them once every other was found, so that the batch knows how many units the
// others hold: as many of its grabs out of units at home may reserve and fall through, the rest
// are told sold out in its one call (grab.lua's "sharded" argument). Without it, every grab of a
// sold-out item's crowd that came once a finding lapsed, or once a unit came back, reserved its
// unit, fell through each other shard and gave the reservation back, four calls in turn, each
// waiting for the replicas, until one of them found the shards empty again: on a starved machine
// the fall-throughs piled up, for a unit or none (clicks waiting 0.95 s in the nemesis's Cluster
// seeds 170 and 188). One look per activity at a time on this node, the batches that need it
// waiting for it, bounded by emptyFor. A shard it cannot read (Redis failing, slow or moving)
// keeps its finding for another emptyFor: units given back there since wait that much longer to
// be found, rather than every grab falling through a Redis already too slow to answer a read.
func (g *Gate) lookAgain(a sale.Activity) {
	g.looks.Do(a.ID, func() (any, error) {
		ctx, cancel := context.WithTimeout(context.Background(), emptyFor)
		defer cancel()
		ids := g.seen.lapsed(a, time.Now())
		stocks := make([]*redis.StringCmd, len(ids))
		_, err := g.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range ids {
				stocks[i] = p.Get(ctx, keysOf(id).stock)
			}
			return nil
		})
		now := time.Now()
		for i, id := range ids {
			left, cerr := stocks[i].Int64()
			switch {
			case err != nil && !errors.Is(err, redis.Nil):
				g.seen.stand(id, now)
			case errors.Is(cerr, redis.Nil): // not loaded: nothing to sell there
				g.seen.found(a, id, 0, now)
			default:
				g.seen.found(a, id, left, now)
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
		if g.seen.empty(a, id, time.Now()) {
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
			if code == 0 {
				g.seen.took(id)
			}
			// Won: the unit and the stream entry are written. A failure to settle leaves the
			// reservation standing, which holds the user's limit as the settled grab would, until
			// the sweeper (Settle) finds the unit and settles it.
			_ = g.home(ctx, a, home, "took", token, r.UserID, r.IdempotencyKey, j, rec)
			return parseRecord(a.ID, token, rec)
		case -5, -1: // nothing here (or not loaded: nothing to sell there either)
			g.seen.found(a, id, 0, time.Now())
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
