package redisstore

import (
	"context"
	"strconv"

	"github.com/redis/go-redis/v9"

	"seckill/internal/sale"
)

// Waves: a reservation sale's reservers with their waves (sale.Waves). Each reserver is a field
// of the reserved hash of their home shard, beside their holdings, so that grab.lua reads their
// wave in the step that takes their unit; the hash's NL field, written on every shard once all
// are copied, seals the set. Redis keeps a hash of up to hash-max-listpack-entries (128 by
// default) as a listpack; a million reservers on one shard are a hashtable, some 56 bytes each
// (BenchmarkReservedSetMemory, docs/BENCHMARKS.md).

// sealField is the reserved hash's field that seals it: not a user id (they have no NL).
const sealField = "\n"

// HoldWaves implements sale.Waves: one HSET per shard, in one pipeline.
func (g *Gate) HoldWaves(ctx context.Context, a sale.Activity, waves map[string]int64) error {
	n := shardsOf(a)
	byShard := make([][]any, n)
	for user, wave := range waves {
		i := homeShard(user, n)
		byShard[i] = append(byShard[i], user, wave)
	}
	_, err := g.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, fields := range byShard {
			if len(fields) > 0 {
				p.HSet(ctx, keysOf(ShardID(a.ID, int64(i))).reserved, fields...)
			}
		}
		return nil
	})
	if err != nil {
		return sale.Busy(err, "hold the reservers of %s on redis", a.ID)
	}
	return nil
}

// SealWaves implements sale.Waves: every shard's hash is sealed, each with the count.
func (g *Gate) SealWaves(ctx context.Context, a sale.Activity, reserved int64) error {
	_, err := g.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range shardsOf(a) {
			p.HSet(ctx, keysOf(ShardID(a.ID, i)).reserved, sealField, strconv.FormatInt(reserved, 10))
		}
		return nil
	})
	if err != nil {
		return sale.Busy(err, "seal the reservers of %s on redis", a.ID)
	}
	return nil
}

// WavesSealed implements sale.Waves: every shard's hash must be sealed. A shard whose master
// failed over to a replica that had not the seal yet has lost it, and the set is copied again;
// one that has it has every reserver written before it (a replica applies its master's writes
// in order).
func (g *Gate) WavesSealed(ctx context.Context, a sale.Activity) (bool, error) {
	n := shardsOf(a)
	cmds := make([]*redis.BoolCmd, n)
	_, err := g.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range n {
			cmds[i] = p.HExists(ctx, keysOf(ShardID(a.ID, i)).reserved, sealField)
		}
		return nil
	})
	if err != nil {
		return false, sale.Busy(err, "read the reservers' seal of %s on redis", a.ID)
	}
	for _, c := range cmds {
		if !c.Val() {
			return false, nil
		}
	}
	return true, nil
}
