package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/sale"
)

// Passes: the one-time path tokens that a solved challenge earns (see sale.Gate.IssuePass). A
// pass is a key on its user's home shard (passKey), so that grab.lua checks and spends it in the
// same atomic step that takes the unit; SpendPass spends one on its own, for a line's join.

var (
	//go:embed spend.lua
	spendLua    string
	spendScript = redis.NewScript(spendLua)
)

// IssuePass implements sale.Gate.
func (g *Gate) IssuePass(ctx context.Context, a sale.Activity, userID, token string, now, expires time.Time) error {
	ttl := expires.Sub(now)
	if ttl <= 0 {
		return fmt.Errorf("%w: pass expires before it is issued", sale.ErrInvalid)
	}
	// Redis expires the key (a little after the pass, so that the script, not a vanished key,
	// says "expired"); the script checks the expiry itself against the grab's clock.
	shard := ShardID(a.ID, homeShard(userID, shardsOf(a))) // where the user's grabs are checked
	err := g.rdb.Set(ctx, passKey(shard, token), userID+"\n"+strconv.FormatInt(expires.UnixMilli(), 10), ttl+time.Second).Err()
	if err != nil {
		return sale.Busy(err, "issue a pass on redis")
	}
	return nil
}

// SpendPass implements sale.Gate, in one script (spend.lua): checked and marked spent at once, so
// that it is spent once however many joins present it at the same time. The mark names this
// call, so that go-redis resending the script after a lost reply is told "spent" again rather
// than refused.
func (g *Gate) SpendPass(ctx context.Context, a sale.Activity, userID, token string, now time.Time) error {
	key := passKey(ShardID(a.ID, homeShard(userID, shardsOf(a))), token)
	n, err := g.repl.runScript(ctx, g.rdb, g.rdb, spendScript, []string{key}, userID, now.UnixMilli(),
		sale.NewGrabToken(time.Now())).Int64()
	if err != nil {
		return sale.Busy(err, "spend a pass on redis")
	}
	if n != 1 {
		return fmt.Errorf("%w: the path token is unknown, spent, expired or someone else's", sale.ErrChallengeRequired)
	}
	return nil
}
