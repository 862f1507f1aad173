package redisstore

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/sale"
)

// This file is the package's key schema: the name of every key it writes, and the formats of
// the grab record and of the stream entry, which the Lua scripts write and the Go code reads.
//
// Key layout. Every key of an activity begins with "{act:ID}:": the hash tag {act:ID} puts them
// all in one slot, so that one script can read and write them atomically, on Redis Cluster too.
// A sharded stock (StockShards > 1) has as many sets of these keys, one per shard, each in a slot
// of its own: shard 0 is the activity's own, shard i the keys of the id "ID/i" (ShardID; no
// activity id has a '/'). An activity, or each shard of its stock, has:
//
//	{act:ID}:stock         string: units left (for a red packet, shares left); a load writes it
//	                       last, so its presence means "loaded"
//	{act:ID}:shares        list of "index:amount", red packets only, popped in index order
//	{act:ID}:held          hash: user -> units held (on a home shard, reservations included)
//	{act:ID}:answers       hash: user NUL idempotency key -> token NL record, a keyed grab's first
//	                       answer; NL token while that grab is reserved and looking on the other
//	                       shards
//	{act:ID}:grabs         hash: token -> record, every unit held on this shard now (a release
//	                       deletes it)
//	{act:ID}:stream        stream of the grabs won here, for the workers (group Group)
//	{act:ID}:pending       hash: token -> "user NL key NL now (Unix ms)", a grab of a sharded stock
//	                       reserved here while it looks for a unit on the other shards
//	{act:ID}:away          hash: token -> "shard NL record", a grab of a user of this shard that
//	                       took its unit on another shard
//	{act:ID}:shards        string, shard 0 only: how many shards the stock has
//	{act:ID}:revision      string: the revision of the activity the shard holds
//	                       (sale.Activity.Revision); absent, 1
//	{act:ID}:reserved      hash: user -> wave (from 1), a reservation sale's reservers whose home
//	                       the shard is; and NL -> how many reserved in all, once the gate holds
//	                       them all (sealed, on every shard). A load leaves it (see Waves)
//	{act:ID}:dead          stream of the entries no worker could read, for a person to look at
//	{act:ID}:pass:TOKEN    string: a path token's "user NL expiry (Unix ms)"; once spent, NL and
//	                       the id of the grab or the spend that spent it. On the user's home shard;
//	                       it expires by itself
//	{act:ID}:rate:USER     string: the user's request bucket on the activity (sale.UserRate,
//	                       GCRA): the time (Unix µs, Redis's clock) at which its next request
//	                       would find it empty. On the user's home shard; it expires by itself
//	{act:ID}:leaders       sorted set, {act:ID}:leaders:hist hash and {act:ID}:leaders:meta hash:
//	                       a red packet's leaderboard (see Ranking), on the activity's own slot;
//	                       {act:ID}:leaders:gone set: the members removed from it (rank.lua)
//
// An activity's waiting line has a hash tag of its own, {line:ID}, apart from its stock's slot
// (see lineKeys). Challenges ("seckill:challenge:ID") and leases ("seckill:lease:NAME") are one
// key each, with no hash tag.
//
// The risk windows (RiskWindows, riskwindows.go) are per client address, device fingerprint,
// page signals and user, each with a hash tag of its own, apart from any activity; every key
// expires a window and a slice (70 s) after it was last written:
//
//	{risk:ip:ADDR}            hash: slice -> the address's requests in it, the slices of the
//	                          window (a slice is a sixth of it)
//	{risk:ip:ADDR}:users      sorted set: user -> the last slice the user came from the address
//	                          in, at most as many as the rules weigh (64 at least)
//	{risk:fp:PRINT}           the same two per device fingerprint (the page's hex hash)
//	{risk:fp:PRINT}:users
//	{risk:rp:DIGEST}          hash: the requests of a page's exact signals (hex of 12 bytes)
//	{risk:user:ID}            string: the user's last challenge solve (its slice and its length
//	                          in ns, 8 bytes each, little endian; zeros: none), then the last 8
//	                          clicks (Unix ns, 8 bytes each), newest first

// actPrefix is the beginning of every key of id (an activity, or a shard of its stock named by
// ShardID): "{act:ID}:", whose hash tag puts them in one slot.
func actPrefix(id string) string { return "{act:" + id + "}:" }

// keys of an activity (or of one shard of its stock), all in the slot of its hash tag.
type keys struct{ stock, shares, held, answers, grabs, stream, pending, away, shards, revision, reserved string }

// keysOf returns the keys of an activity, or of a shard of its stock named by ShardID.
func keysOf(id string) keys {
	p := actPrefix(id)
	return keys{p + "stock", p + "shares", p + "held", p + "answers", p + "grabs", p + "stream", p + "pending", p + "away",
		p + "shards", p + "revision", p + "reserved"}
}

// shardsOf is the number of counters a's stock is split into.
func shardsOf(a sale.Activity) int64 { return max(a.StockShards, 1) }

// ShardID names shard i of an activity's stock.
func ShardID(activityID string, i int64) string {
	if i == 0 {
		return activityID
	}
	return activityID + "/" + strconv.FormatInt(i, 10)
}

// baseID is the activity a shard id belongs to.
func baseID(id string) string {
	base, _, _ := strings.Cut(id, "/")
	return base
}

// StreamIDs returns the ids whose streams carry the grabs of acts: each activity's, and each
// shard's of a sharded stock. A Queue reads them all.
func StreamIDs(acts []sale.Activity) []string {
	var ids []string
	for _, a := range acts {
		for i := range shardsOf(a) {
			ids = append(ids, ShardID(a.ID, i))
		}
	}
	return ids
}

// StreamKey is the key of an activity's stream of grabs.
func StreamKey(activityID string) string { return keysOf(activityID).stream }

// DeadKey is the stream where entries no worker can read are kept for a person to look at.
func DeadKey(activityID string) string { return actPrefix(activityID) + "dead" }

// passKey is the key of a pass, in the activity's slot: the grab script reads it with the stock.
func passKey(activityID, pass string) string { return actPrefix(activityID) + "pass:" + pass }

// rateKey is the key of user's request bucket on activityID (a shard id: the user's home).
func rateKey(activityID, user string) string { return actPrefix(activityID) + "rate:" + user }

// rankKeys are the keys of an activity's leaderboard (see Ranking), in the activity's slot.
type rankKeys struct{ zset, hist, meta, gone string }

func rankKeysOf(activityID string) rankKeys {
	p := actPrefix(activityID)
	return rankKeys{p + "leaders", p + "leaders:hist", p + "leaders:meta", p + "leaders:gone"}
}

// lineKeys are the keys of an activity's line.
type lineKeys struct {
	state   string // hash: sealed, drawn, early, tail, head, rate
	tickets string // hash: ticket id -> record (see line_join.lua)
	users   string // hash: user -> the user's latest ticket id
	at      string // hash: place -> ticket id
	early   string // list: the early crowd's ticket ids, in the order they came
	drawn   string // hash: early ticket id -> its place, once drawn
	lead    string // string: the drainer holding the line
	keys    string // hash: "user NL idempotency key" -> the ticket id the join with it took
}

func lineKeysOf(id string) lineKeys {
	p := "{line:" + id + "}:"
	return lineKeys{p + "state", p + "tickets", p + "users", p + "at", p + "early", p + "drawn", p + "lead", p + "keys"}
}

// flag is a script's argument for b: "1" or "0".
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// challengeKey is the key of the challenge id (see Challenges).
func challengeKey(id string) string { return "seckill:challenge:" + id }

// leaseKey is the key of the lease name (see Lease).
func leaseKey(name string) string { return "seckill:lease:" + name }

// The grab record. A grab's record is its buyer's side, kept in the grabs hash (and after its
// token in answers and after its shard in away): "user NL key NL share NL amount NL at", the
// user, the idempotency key ("" for none), the red packet share's index (0 for an item), the
// amount in cents and the grab's time in Unix milliseconds. grab.lua and take.lua write it, the
// load writes it with record, and parseRecord reads it.

// record is the grab record of g.
func record(g sale.Grab) string {
	return g.UserID + "\n" + g.IdempotencyKey + "\n" + strconv.FormatInt(g.Share, 10) + "\n" +
		strconv.FormatInt(g.AmountCents, 10) + "\n" + strconv.FormatInt(g.At.UnixMilli(), 10)
}

// parseRecord reads a grab's record (see record).
func parseRecord(activityID, token, rec string) (sale.Grab, error) {
	f := strings.Split(rec, "\n")
	if len(f) != 5 {
		return sale.Grab{}, fmt.Errorf("grab %s: malformed record %q", token, rec)
	}
	share, err1 := strconv.ParseInt(f[2], 10, 64)
	amount, err2 := strconv.ParseInt(f[3], 10, 64)
	at, err3 := strconv.ParseInt(f[4], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return sale.Grab{}, fmt.Errorf("grab %s: malformed record %q: %w", token, rec, err)
	}
	return sale.Grab{Token: token, ActivityID: activityID, UserID: f[0], IdempotencyKey: f[1], Share: share,
		AmountCents: amount, At: time.UnixMilli(at).UTC()}, nil
}

// The stream entry. A grab won on a shard is appended to that shard's stream (grab.lua, or
// take.lua for a unit taken from another shard than the user's home) with these fields, every
// value a string: the grab token, the activity's id (the activity's own, on a shard's stream
// too), the user, the idempotency key, the share's index, the amount in cents and the grab's
// time in Unix milliseconds, as in the record, and, when the grab was traced, the W3C
// traceparent of the span that published it (tp). A dead letter (Queue.Bury) carries the same
// fields, with its reason.
const (
	entryToken    = "token"
	entryActivity = "activity"
	entryUser     = "user"
	entryKey      = "key"
	entryShare    = "share"
	entryAmount   = "amount"
	entryAt       = "at"
	entryTrace    = "tp"
)

// grabOfEntry reads a stream entry written by grab.lua or take.lua.
func grabOfEntry(m redis.XMessage) (sale.Grab, error) {
	str := func(k string) string { s, _ := m.Values[k].(string); return s }
	num := func(k string) (int64, error) { return strconv.ParseInt(str(k), 10, 64) }
	share, err1 := num(entryShare)
	amount, err2 := num(entryAmount)
	at, err3 := num(entryAt)
	g := sale.Grab{Token: str(entryToken), ActivityID: str(entryActivity), UserID: str(entryUser),
		IdempotencyKey: str(entryKey), Share: share, AmountCents: amount, At: time.UnixMilli(at).UTC(), Trace: str(entryTrace)}
	if err := errors.Join(err1, err2, err3); err != nil || g.Token == "" || g.ActivityID == "" || g.UserID == "" {
		return sale.Grab{}, fmt.Errorf("stream entry %s is malformed: %v", m.ID, m.Values)
	}
	return g, nil
}
