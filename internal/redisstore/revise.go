package redisstore

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"

	"seckill/internal/sale"
)

var (
	//go:embed revise.lua
	reviseLua    string
	reviseScript = redis.NewScript(reviseLua)
)

// revisionKeys are the keys revise.lua reads of a shard.
func (k keys) revisionKeys() []string { return []string{k.stock, k.revision} }

// Revise implements sale.Gate: each shard is given the revision by revise.lua, atomically on
// its slot, the other shards first and shard 0 (which takes the units added) last. A shard that
// is not loaded (its master failed over to an empty replica) is passed over, and the others are
// given the revision still; the answer is then ErrUnloaded, the revision stays owed, and the
// rebuild that loads the shard gives it again whole: the shards that have it are left as they
// are.
func (g *Gate) Revise(ctx context.Context, a sale.Activity, add int64) error {
	var missing error
	for i := shardsOf(a) - 1; i >= 0; i-- {
		units := int64(0)
		if i == 0 {
			units = add
		}
		k := keysOf(ShardID(a.ID, i))
		code, err := g.repl.runScript(ctx, g.rdb, g.rdb, reviseScript, k.revisionKeys(), a.Revision, units, 0).Int64()
		switch {
		case err != nil:
			return sale.Busy(err, "revise activity %s on redis", a.ID)
		case code == -1:
			if missing == nil {
				missing = fmt.Errorf("activity %s, shard %d: %w", a.ID, i, sale.ErrUnloaded)
			}
		case code == -2:
			return fmt.Errorf("revise activity %s to %d, shard %d: an older revision is held: %w", a.ID, a.Revision, i, sale.ErrChanged)
		case code < 0:
			return fmt.Errorf("revise activity %s on redis: script answered %d", a.ID, code)
		}
	}
	return missing
}
