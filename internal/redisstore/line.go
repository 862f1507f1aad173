package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/sale"
)

var (
	//go:embed line_join.lua
	lineJoinLua    string
	lineJoinScript = redis.NewScript(lineJoinLua)

	//go:embed line_next.lua
	lineNextLua    string
	lineNextScript = redis.NewScript(lineNextLua)

	//go:embed line_admit.lua
	lineAdmitLua    string
	lineAdmitScript = redis.NewScript(lineAdmitLua)

	//go:embed line_skip.lua
	lineSkipLua    string
	lineSkipScript = redis.NewScript(lineSkipLua)

	//go:embed line_seal.lua
	lineSealLua    string
	lineSealScript = redis.NewScript(lineSealLua)

	//go:embed line_revise.lua
	lineReviseLua    string
	lineReviseScript = redis.NewScript(lineReviseLua)
)

var _ sale.Line = (*Line)(nil)

// Line is a sale.Line on Redis: every node's joins go to one place, and one node's drainer
// (Lead) works it. An activity's line lives under its own hash tag, {line:ID}, apart from its
// stock's slot, so a crowd joining and the drainer's grabs load different shards of a cluster.
// Inside it a ticket is known by its random part, the token less ".ID": a queued user costs a
// few short hash fields (see BenchmarkLineJoin for the bytes).
type Line struct {
	rdb  redis.UniversalClient
	repl Replication
}

// NewLine returns a line on rdb.
func NewLine(rdb redis.UniversalClient) *Line { return &Line{rdb: rdb} }

// WithReplication makes every write that answers a ticket or tells its place (a join, the
// draw, an admission's record, a skip) and every revision wait for r's replicas before it is
// acknowledged: a failover that lost one could take back a win already read by its owner, or
// answer the line's winners sold out.
func (l *Line) WithReplication(r Replication) *Line {
	l.repl = r
	return l
}

// Drop implements sale.Line.
func (l *Line) Drop(ctx context.Context, activityID string) error {
	k := lineKeysOf(activityID)
	if err := l.rdb.Del(ctx, k.state, k.tickets, k.users, k.at, k.early, k.drawn, k.lead, k.keys).Err(); err != nil {
		return sale.Busy(err, "drop the line of %s on redis", activityID)
	}
	return nil
}

// ticketID is a token's part that names the ticket within its line.
func ticketID(token, activityID string) string { return strings.TrimSuffix(token, "."+activityID) }

// Join implements sale.Line.
func (l *Line) Join(ctx context.Context, r sale.JoinRequest) (sale.Joined, error) {
	a := r.Activity
	if r.Lookup && r.Key == "" {
		return sale.Joined{}, fmt.Errorf("%w: a lookup without an idempotency key", sale.ErrNotFound)
	}
	k := lineKeysOf(a.ID)
	res, err := l.repl.runScript(ctx, l.rdb, l.rdb, lineJoinScript,
		[]string{k.state, k.tickets, k.users, k.at, k.early, k.drawn, k.keys},
		ticketID(r.Token, a.ID), r.UserID, r.Now.UnixMilli(), a.StartAt.UnixMilli(), a.QueueCap, flag(r.Tail), r.Key,
		flag(r.Lookup)).Slice()
	if err != nil {
		return sale.Joined{}, sale.Busy(err, "join the line on redis")
	}
	switch code, _ := res[0].(int64); code {
	case -1:
		return sale.Joined{}, fmt.Errorf("%w: %d tickets are waiting", sale.ErrQueueFull, a.QueueCap)
	case -2:
		return sale.Joined{}, fmt.Errorf("%w: the entries closed at the start", sale.ErrEnded)
	case -3:
		return sale.Joined{}, fmt.Errorf("%w: the line was told the sale ended", sale.ErrEnded)
	case -4:
		return sale.Joined{}, fmt.Errorf("%w: no ticket was taken with that idempotency key", sale.ErrNotFound)
	case 0, 1:
		if len(res) != 4+len(stateFields) {
			return sale.Joined{}, fmt.Errorf("join the line: unexpected answer %v", res)
		}
		id, _ := res[1].(string)
		rec, _ := res[2].(string)
		t, err := parseTicket(a.ID, id, rec)
		if err != nil {
			return sale.Joined{}, err
		}
		t.Place, _ = res[3].(int64)
		return sale.Joined{Ticket: t, Fresh: code == 1, Line: parseState(res[4:])}, nil
	default:
		return sale.Joined{}, fmt.Errorf("join the line: unexpected answer %v", res)
	}
}

// Revise implements sale.Line.
func (l *Line) Revise(ctx context.Context, a sale.Activity) error {
	n, err := l.repl.runScript(ctx, l.rdb, l.rdb, lineReviseScript, []string{lineKeysOf(a.ID).state}, a.Revision, a.EndAt.UnixMilli()).Int64()
	switch {
	case err != nil:
		return sale.Busy(err, "revise the line of %s on redis", a.ID)
	case n < 0:
		return fmt.Errorf("revise the line of %s on redis: script answered %d", a.ID, n)
	}
	return nil
}

// parseTicket reads a ticket record (see line_join.lua).
func parseTicket(activityID, id, rec string) (sale.Ticket, error) {
	f := strings.Split(rec, "\n")
	if len(f) != 7 {
		return sale.Ticket{}, fmt.Errorf("ticket %s: malformed record %q", id, rec)
	}
	place, err1 := strconv.ParseInt(f[1], 10, 64)
	joined, err2 := strconv.ParseInt(f[3], 10, 64)
	amount, err3 := strconv.ParseInt(f[6], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return sale.Ticket{}, fmt.Errorf("ticket %s: malformed record %q: %w", id, rec, err)
	}
	return sale.Ticket{Token: id + "." + activityID, ActivityID: activityID, UserID: f[0], Place: place, Early: f[2] == "1",
		JoinedAt: time.UnixMilli(joined).UTC(), Outcome: sale.Outcome(f[4]), OrderToken: f[5], AmountCents: amount}, nil
}

// Ticket implements sale.Line.
func (l *Line) Ticket(ctx context.Context, token string) (sale.Ticket, sale.LineState, error) {
	activityID, ok := sale.TicketActivity(token)
	if !ok {
		return sale.Ticket{}, sale.LineState{}, fmt.Errorf("ticket %s: %w", token, sale.ErrNotFound)
	}
	k, id := lineKeysOf(activityID), ticketID(token, activityID)
	var rec, drawn *redis.StringCmd
	var state *redis.SliceCmd
	// One slot: the three reads go in one transaction, so the place and the head agree.
	_, err := l.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		rec = p.HGet(ctx, k.tickets, id)
		drawn = p.HGet(ctx, k.drawn, id)
		state = p.HMGet(ctx, k.state, stateFields...)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return sale.Ticket{}, sale.LineState{}, sale.Busy(err, "read a ticket on redis")
	}
	if rec.Err() != nil {
		return sale.Ticket{}, sale.LineState{}, fmt.Errorf("ticket %s: %w", token, sale.ErrNotFound)
	}
	t, err := parseTicket(activityID, id, rec.Val())
	if err != nil {
		return sale.Ticket{}, sale.LineState{}, err
	}
	if t.Early {
		t.Place = -1
		if p, err := drawn.Int64(); err == nil {
			t.Place = p
		}
	}
	return t, parseState(state.Val()), nil
}

var stateFields = []string{"sealed", "drawn", "early", "tail", "head", "rate"}

func parseState(v []any) sale.LineState {
	n := func(i int) int64 {
		s, _ := v[i].(string)
		x, _ := strconv.ParseInt(s, 10, 64)
		return x
	}
	st := sale.LineState{Sealed: n(0) == 1, Drawn: n(1) == 1, Early: n(2), Head: n(4)}
	st.Joined = st.Early + n(3)
	if st.Drawn {
		st.Placed = st.Joined
	}
	if s, ok := v[5].(string); ok {
		st.Rate, _ = strconv.ParseFloat(s, 64)
	}
	return st
}

// State implements sale.Line.
func (l *Line) State(ctx context.Context, activityID string) (sale.LineState, error) {
	v, err := l.rdb.HMGet(ctx, lineKeysOf(activityID).state, stateFields...).Result()
	if err != nil {
		return sale.LineState{}, sale.Busy(err, "read a line on redis")
	}
	return parseState(v), nil
}

// drawChunk is how many places one HSET of the draw writes.
const drawChunk = 2048

// Seal implements sale.Line. It seals the line, reads the early crowd, computes the draw here
// and writes its places, then marks the line drawn. Every step may run twice (a drainer that dies
// half-way, two drainers at once): the draw is a function of the seed and the early tokens, so
// every writer writes the same places.
func (l *Line) Seal(ctx context.Context, a sale.Activity) (sale.LineState, error) {
	k := lineKeysOf(a.ID)
	res, err := lineSealScript.Run(ctx, l.rdb, []string{k.state}, "0").Int64Slice()
	if err != nil {
		return sale.LineState{}, sale.Busy(err, "seal a line on redis")
	}
	if res[1] == 0 {
		ids, err := l.rdb.LRange(ctx, k.early, 0, -1).Result()
		if err != nil {
			return sale.LineState{}, sale.Busy(err, "read the early crowd on redis")
		}
		if int64(len(ids)) != res[0] {
			return sale.LineState{}, fmt.Errorf("line %s: %d early tickets listed, %d counted", a.ID, len(ids), res[0])
		}
		suffix := "." + a.ID
		tokens := make([]string, len(ids))
		for i, id := range ids {
			tokens[i] = id + suffix
		}
		order := sale.DrawOrder(a.Seed, tokens)
		for lo := 0; lo < len(order); lo += drawChunk {
			hi := min(lo+drawChunk, len(order))
			at := make([]any, 0, 2*(hi-lo))
			places := make([]any, 0, 2*(hi-lo))
			for i := lo; i < hi; i++ {
				id := ticketID(order[i], a.ID)
				at = append(at, i, id)
				places = append(places, id, i)
			}
			if _, err := l.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.HSet(ctx, k.at, at...)
				p.HSet(ctx, k.drawn, places...)
				return nil
			}); err != nil {
				return sale.LineState{}, sale.Busy(err, "write the draw on redis")
			}
		}
		// Through the replicas: the draw's places, written before on the same master, with it.
		if err := l.repl.runScript(ctx, l.rdb, l.rdb, lineSealScript, []string{k.state}, "1").Err(); err != nil {
			return sale.LineState{}, sale.Busy(err, "seal a line on redis")
		}
	}
	return l.State(ctx, a.ID)
}

// Early implements sale.Line.
func (l *Line) Early(ctx context.Context, activityID string) ([]string, error) {
	ids, err := l.rdb.LRange(ctx, lineKeysOf(activityID).early, 0, -1).Result()
	if err != nil {
		return nil, sale.Busy(err, "read the early crowd on redis")
	}
	for i := range ids {
		ids[i] += "." + activityID
	}
	return ids, nil
}

// Next implements sale.Line.
func (l *Line) Next(ctx context.Context, activityID string, n int) (int64, int64, []sale.Ticket, error) {
	k := lineKeysOf(activityID)
	res, err := lineNextScript.Run(ctx, l.rdb, []string{k.state, k.at, k.tickets}, n).Slice()
	if err != nil {
		return 0, 0, nil, sale.Busy(err, "read the head of a line on redis")
	}
	if len(res) < 2 || (len(res)-2)%3 != 0 {
		return 0, 0, nil, fmt.Errorf("line %s: unexpected answer of %d values", activityID, len(res))
	}
	from, _ := res[0].(int64)
	to, _ := res[1].(int64)
	ts := make([]sale.Ticket, 0, (len(res)-2)/3)
	for i := 2; i < len(res); i += 3 {
		place, _ := res[i].(int64)
		id, _ := res[i+1].(string)
		rec, _ := res[i+2].(string)
		t, err := parseTicket(activityID, id, rec)
		if err != nil {
			return 0, 0, nil, err
		}
		t.Place = place
		ts = append(ts, t)
	}
	return from, to, ts, nil
}

// Admit implements sale.Line.
func (l *Line) Admit(ctx context.Context, activityID string, from, to int64, ts []sale.Ticket, rate float64) error {
	k := lineKeysOf(activityID)
	args := make([]any, 0, 3+4*len(ts))
	args = append(args, from, to, strconv.FormatFloat(rate, 'f', 1, 64))
	for _, t := range ts {
		args = append(args, ticketID(t.Token, activityID), string(t.Outcome), t.OrderToken, t.AmountCents)
	}
	if err := l.repl.runScript(ctx, l.rdb, l.rdb, lineAdmitScript, []string{k.state, k.tickets}, args...).Err(); err != nil {
		return sale.Busy(err, "record admissions on redis")
	}
	return nil
}

// Skip implements sale.Line.
func (l *Line) Skip(ctx context.Context, activityID string, from int64) (int64, error) {
	head, err := l.repl.runScript(ctx, l.rdb, l.rdb, lineSkipScript, []string{lineKeysOf(activityID).state}, from).Int64()
	if err != nil {
		return from, sale.Busy(err, "answer a line on redis")
	}
	return head, nil
}

// Lead implements sale.Line.
func (l *Line) Lead(ctx context.Context, activityID, holder string, ttl time.Duration) (bool, error) {
	held, err := hold(ctx, l.rdb, lineKeysOf(activityID).lead, holder, ttl)
	if err != nil {
		return false, sale.Busy(err, "lead a line on redis")
	}
	return held, nil
}
