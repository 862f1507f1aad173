package redisstore

import (
	"context"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/risk"
	"seckill/internal/sale"
)

var (
	//go:embed risk.lua
	riskLua    string
	riskScript = redis.NewScript(riskLua)
)

var _ risk.Windows = (*RiskWindows)(nil)

// RiskWindows are the risk engine's windows (risk.Windows) on Redis, shared by every node: the
// requests and distinct accounts of a client address and of a device fingerprint, the requests
// of a page's exact signals, a user's last clicks and challenge solve. A node alone sees the
// part of a farm, or of a user's clicks, that the load balancer sends it; here every node counts
// in one place.
//
// A grab costs one round trip. Each of the keys it is counted under (address, fingerprint,
// signals, user) has keys of its own hash tag, apart from any activity's slot. On one server (or
// a Sentinel's master) one call of risk.lua counts them all; on Redis Cluster, a call per key
// (each call's keys in one slot), all sent at once: go-redis routes each to its node, one round
// trip to each node it touches, at most four. The calls ride the client's asynchronous automatic
// pipeline, so that a crowd's grabs share its reads and writes.
//
// The distinct accounts of an address or a fingerprint are a sorted set of user -> the slice of
// the window they last came in, bounded: at most Keys.MaxUsers of them (the most a rule or the
// features weigh; the oldest go first), so that a farm's key holds as many as its judges count
// and no more. They are exact, as a node's memory is. Every key expires a window and a slice
// after it was last written.
type RiskWindows struct {
	rdb     redis.UniversalClient
	calls   redis.Scripter // the asynchronous automatic pipeline (or rdb)
	async   bool           // calls answers at once, and blocks when a result is read
	cluster bool           // a call per key of a grab, not one for all
	window  time.Duration
	ttl     int64 // the keys' lifetime in ms: the window and a slice
}

// NewRiskWindows returns the windows of window (risk.DefaultWindow if zero) on rdb.
func NewRiskWindows(rdb redis.UniversalClient, window time.Duration) *RiskWindows {
	if window <= 0 {
		window = risk.DefaultWindow
	}
	w := &RiskWindows{rdb: rdb, calls: rdb, window: window, ttl: (window + window/risk.WindowSlices).Milliseconds()}
	if ap, err := rdb.AsyncAutoPipeline(); err == nil {
		w.calls, w.async = ap, true
	}
	_, w.cluster = rdb.(*redis.ClusterClient)
	return w
}

// riskCall is one call of risk.lua: some of a grab's parts.
type riskCall struct {
	parts []byte
	keys  []string
	cmd   *redis.Cmd
}

// Count implements risk.Windows. Errors: sale.ErrBusy, Redis failed.
func (w *RiskWindows) Count(ctx context.Context, k risk.Keys, at time.Time) (risk.Seen, error) {
	now := risk.SliceOf(at, w.window)
	calls := w.plan(k, now)
	if len(calls) == 0 {
		return risk.Seen{}, nil
	}
	var click [8]byte
	binary.LittleEndian.PutUint64(click[:], uint64(at.UnixNano()))
	args := []any{nil, now, w.ttl, k.User, click[:], 8 * risk.MaxClicks, k.UsersKept()}
	if err := w.run(ctx, calls, args); err != nil {
		return risk.Seen{}, sale.Busy(err, "count a grab in the risk windows on redis")
	}
	seen, err := w.seen(calls, k, now)
	if err != nil {
		return risk.Seen{}, sale.Busy(err, "count a grab in the risk windows on redis")
	}
	return seen, nil
}

// plan lays out the calls of a grab counted under k at slice now: one, or on a cluster one per
// key (each a hash tag of its own).
func (w *RiskWindows) plan(k risk.Keys, now int64) []riskCall {
	calls := make([]riskCall, 0, 4)
	add := func(part byte, keys ...string) {
		if w.cluster || len(calls) == 0 {
			calls = append(calls, riskCall{})
		}
		c := &calls[len(calls)-1]
		c.parts, c.keys = append(c.parts, part), append(c.keys, keys...)
	}
	counted := func(key string) { add('u', key, key+":users") }
	if k.IP != "" {
		counted(riskIPKey(k.IP))
	}
	if k.Fingerprint != "" {
		counted(riskPrintKey(k.Fingerprint))
	}
	if k.Replay != "" {
		add('r', riskReplayKey(k.Replay))
	}
	if k.User != "" && k.Clicks {
		add('c', riskUserKey(k.User))
	}
	return calls
}

// run sends the calls at once, by the script's SHA; a server that does not know it (a new
// one, a failover, SCRIPT FLUSH) gets it whole, in a second round trip.
func (w *RiskWindows) run(ctx context.Context, calls []riskCall, args []any) error {
	send := func(eval func(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd, again bool) {
		var pipe redis.Pipeliner
		on := w.calls
		if !w.async {
			pipe = w.rdb.Pipeline()
			on = pipe
		}
		for i := range calls {
			if c := &calls[i]; !again || noScript(c.cmd) {
				c.cmd = eval(ctx, on, c.keys, withParts(args, c.parts)...)
			}
		}
		if pipe != nil {
			pipe.Exec(ctx) // its errors are the commands'
		}
	}
	send(riskScript.EvalSha, false)
	for i := range calls {
		if noScript(calls[i].cmd) { // reading an error waits for the call's answer
			send(riskScript.Eval, true)
			break
		}
	}
	for i := range calls {
		if err := calls[i].cmd.Err(); err != nil {
			return err
		}
	}
	return nil
}

func noScript(cmd *redis.Cmd) bool { return redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") }

// withParts is args with the parts of a call first.
func withParts(args []any, parts []byte) []any {
	out := append([]any(nil), args...)
	out[0] = string(parts)
	return out
}

// seen reads the calls' answers.
func (w *RiskWindows) seen(calls []riskCall, k risk.Keys, now int64) (risk.Seen, error) {
	var s risk.Seen
	var answers []any
	for _, c := range calls {
		v, err := c.cmd.Slice()
		if err != nil {
			return s, err
		}
		answers = append(answers, v...)
	}
	next := func() any {
		if len(answers) == 0 {
			return nil
		}
		v := answers[0]
		answers = answers[1:]
		return v
	}
	num := func() (int, error) {
		n, ok := next().(int64)
		if !ok {
			return 0, fmt.Errorf("risk.lua: malformed answer")
		}
		return int(n), nil
	}
	var errs [8]error
	if k.IP != "" {
		s.IPRequests, errs[0] = num()
		s.IPUsers, errs[1] = num()
	}
	if k.Fingerprint != "" {
		s.FPRequests, errs[2] = num()
		s.FPUsers, errs[3] = num()
	}
	if k.Replay != "" {
		s.Replays, errs[4] = num()
	}
	if k.User != "" && k.Clicks {
		if user, ok := next().(string); ok {
			errs[5] = w.user(user, now, &s)
		} else {
			errs[5] = errors.New("risk.lua: malformed answer of the user")
		}
	}
	if err := errors.Join(errs[:]...); err != nil || len(answers) > 0 {
		return risk.Seen{}, fmt.Errorf("risk.lua answered %d values too many, or %w", len(answers), err)
	}
	return s, nil
}

// user reads what the windows keep of a user (see risk.lua: the last solve, 16 bytes, and the
// last clicks, 8 bytes each, newest first) into s: what is inside the window at slice now, the
// clicks newest first.
func (w *RiskWindows) user(b string, now int64, s *risk.Seen) error {
	if len(b) < 16 || (len(b)-16)%8 != 0 {
		return fmt.Errorf("risk windows: a user's record of %d bytes", len(b))
	}
	if slice := int64(binary.LittleEndian.Uint64([]byte(b[:8]))); slice != 0 && risk.Inside(slice, now) {
		s.Solved, s.Solve = true, time.Duration(binary.LittleEndian.Uint64([]byte(b[8:16])))
	}
	b = b[16:]
	for i := 0; i+8 <= len(b) && i < 8*risk.MaxClicks; i += 8 {
		s.Clicks[i/8] = int64(binary.LittleEndian.Uint64([]byte(b[i : i+8])))
	}
	risk.SortClicks(&s.Clicks) // the nodes' clocks may put two clicks out of order
	for i, c := range s.Clicks {
		if c != 0 && !risk.Inside(risk.SliceOf(time.Unix(0, c), w.window), now) {
			clear(s.Clicks[i:])
			break
		}
	}
	return nil
}

// Solved implements risk.Windows. Errors: sale.ErrBusy, Redis failed.
func (w *RiskWindows) Solved(ctx context.Context, user string, solve time.Duration, at time.Time) error {
	now := risk.SliceOf(at, w.window)
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(now))
	binary.LittleEndian.PutUint64(b[8:], uint64(solve))
	calls := []riskCall{{parts: []byte{'s'}, keys: []string{riskUserKey(user)}}}
	if err := w.run(ctx, calls, []any{nil, now, w.ttl, user, b[:], 8 * risk.MaxClicks, 1}); err != nil {
		return sale.Busy(err, "record a challenge solve in the risk windows on redis")
	}
	return nil
}

// The risk windows' keys (see keys.go).
func riskIPKey(ip string) string     { return "{risk:ip:" + ip + "}" }
func riskPrintKey(fp string) string  { return "{risk:fp:" + fp + "}" }
func riskReplayKey(d string) string  { return "{risk:rp:" + hex.EncodeToString([]byte(d)) + "}" }
func riskUserKey(user string) string { return "{risk:user:" + user + "}" }
