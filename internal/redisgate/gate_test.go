package redisgate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/redistest"
	"seckill/internal/sale"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func item(id string, stock, limit int64) sale.Activity {
	return sale.Activity{ID: id, Name: id, Kind: sale.KindItem, Stock: stock, PriceCents: 100, PerUserLimit: limit,
		StartAt: t0, EndAt: t0.Add(time.Hour), PayWindow: time.Minute, Admission: sale.AdmitDirect}
}

func notFound(ctx context.Context, id string) (sale.Activity, error) {
	return sale.Activity{}, sale.ErrNotFound
}

func dial(t *testing.T, spec string) redis.UniversalClient {
	t.Helper()
	rdb, err := Dial(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// TestRetriedScriptTakesOneUnit runs the grab script twice with the same token, as go-redis does
// when a reply is lost: the second run answers the first grab and takes nothing.
func TestRetriedScriptTakesOneUnit(t *testing.T) {
	ctx := context.Background()
	rdb := dial(t, redistest.Start(t, redistest.Options{}).URL())
	g := New(rdb, notFound)
	a := item("retry", 5, 3)
	if err := g.Load(ctx, a, sale.GateState{}); err != nil {
		t.Fatal(err)
	}
	k := keysOf(a.ID)
	run := func(args ...any) []any {
		t.Helper()
		pass, _ := args[len(args)-1].(string)
		act, _ := args[9].(string)
		k := keysOf(act)
		res, err := grabScript.Run(ctx, rdb, []string{k.stock, k.shares, k.held, k.answers, k.grabs, k.stream, passKey(act, pass)}, args...).Slice()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	now := a.StartAt.UnixMilli() + 1
	args := []any{"gtoken", "u1", "", now, a.StartAt.UnixMilli(), a.EndAt.UnixMilli(), 3, "item", 100, a.ID, "0", ""}
	if res := run(args...); res[0] != int64(0) {
		t.Fatalf("first run = %v, want granted", res)
	}
	if res := run(args...); res[0] != int64(1) || res[1] != "gtoken" {
		t.Fatalf("second run = %v, want the first answer", res)
	}
	if n, _ := g.Remaining(ctx, a.ID); n != 4 {
		t.Fatalf("remaining = %d after one grab run twice, want 4", n)
	}
	if n := rdb.XLen(ctx, k.stream).Val(); n != 1 {
		t.Fatalf("stream has %d entries, want 1", n)
	}

	// Bad arguments are refused before anything is written.
	for _, bad := range [][]any{
		{"", "u1", "", now, 0, 1, 1, "item", 1, a.ID, "0", ""},
		{"t", "u1", "", "soon", 0, 1, 1, "item", 1, a.ID, "0", ""},
		{"t", "u1", "", now, 0, 1, 0, "item", 1, a.ID, "0", ""},
		{"t", "u1", "", now, 0, 1, 1, "car", 1, a.ID, "0", ""},
		{"t", "u1", "", now, 0, 1, 1, "item", -1, a.ID, "0", ""},
		{"t", "u1", "", now, 0, 1, 1, "item", 1, a.ID, "yes", ""},
	} {
		if res := run(bad...); res[0] != int64(-9) {
			t.Errorf("args %v: %v, want -9", bad, res)
		}
	}
	if n, _ := g.Remaining(ctx, a.ID); n != 4 {
		t.Fatalf("remaining = %d after refused calls, want 4", n)
	}

	// A retried run spends its pass once and answers as the first run did, even when that answer
	// was a refusal; another grab with the spent pass is refused.
	b := item("retry-pass", 1, 1)
	b.RequireChallenge = true
	taken := sale.Grab{Token: "g0", ActivityID: b.ID, UserID: "u0", At: b.StartAt}
	if err := g.Load(ctx, b, sale.GateState{Held: []sale.Grab{taken}}); err != nil {
		t.Fatal(err)
	}
	if err := g.IssuePass(ctx, b, "u1", "pass1", b.StartAt, b.StartAt.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	withPass := []any{"t2", "u1", "", now, b.StartAt.UnixMilli(), b.EndAt.UnixMilli(), 1, "item", 100, b.ID, "1", "pass1"}
	for i := range 2 {
		if res := run(withPass...); res[0] != int64(-5) {
			t.Fatalf("run %d with the pass on a sold-out sale = %v, want -5 (sold out)", i+1, res)
		}
	}
	withPass[0] = "t3"
	if res := run(withPass...); res[0] != int64(-6) {
		t.Fatalf("another grab with the spent pass = %v, want -6", res)
	}
}

// TestScriptsSurviveAFlush: after SCRIPT FLUSH (what a failover to a fresh replica looks like to
// EVALSHA) grabs go on, the scripts being sent again.
func TestScriptsSurviveAFlush(t *testing.T) {
	ctx := context.Background()
	rdb := dial(t, redistest.Start(t, redistest.Options{}).URL())
	g := New(rdb, notFound)
	a := item("flush", 5, 1)
	if err := g.Load(ctx, a, sale.GateState{}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: "u1", Now: a.StartAt}); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: "u2", Now: a.StartAt}); err != nil {
		t.Fatalf("grab after SCRIPT FLUSH: %v", err)
	}
}

// TestStreamCarriesEveryGrab: each grant is appended to the activity's stream by the same
// script, with what a worker needs to place the order.
func TestStreamCarriesEveryGrab(t *testing.T) {
	ctx := context.Background()
	rdb := dial(t, redistest.Start(t, redistest.Options{}).URL())
	g := New(rdb, notFound)
	a := item("stream", 3, 1)
	if err := g.Load(ctx, a, sale.GateState{}); err != nil {
		t.Fatal(err)
	}
	var tokens []string
	for _, u := range []string{"u1", "u2", "u3", "u4"} {
		gr, err := g.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: u, IdempotencyKey: "k|" + u, Now: a.StartAt})
		if errors.Is(err, sale.ErrSoldOut) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, gr.Token)
	}
	msgs, err := rdb.XRange(ctx, StreamKey(a.ID), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 3 {
		t.Fatalf("stream has %d entries, want 3", len(msgs))
	}
	for i, m := range msgs {
		if m.Values["token"] != tokens[i] || m.Values["activity"] != a.ID || !strings.HasPrefix(m.Values["key"].(string), "k|") {
			t.Errorf("entry %d = %v, want grab %s", i, m.Values, tokens[i])
		}
	}
}

func TestDialRefusesBadSpecs(t *testing.T) {
	for _, spec := range []string{"redis://:bad:port/x", "localhost", "nohost,alsono"} {
		if _, err := Dial(context.Background(), spec); !errors.Is(err, sale.ErrInvalid) {
			t.Errorf("Dial(%q) = %v, want ErrInvalid", spec, err)
		}
	}
}

// TestMalformedEntriesAreBuried: an entry that is not a grab goes to the dead-letter stream
// instead of stalling the workers, and the grabs around it are delivered.
func TestMalformedEntriesAreBuried(t *testing.T) {
	ctx := context.Background()
	rdb := dial(t, redistest.Start(t, redistest.Options{}).URL())
	g := New(rdb, notFound)
	a := item("dl", 5, 1)
	if err := g.Load(ctx, a, sale.GateState{}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: "u1", Now: a.StartAt}); err != nil {
		t.Fatal(err)
	}
	if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: StreamKey(a.ID), Values: map[string]any{"junk": "1"}}).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: "u2", Now: a.StartAt}); err != nil {
		t.Fatal(err)
	}
	q := NewQueue(rdb, "c", func(context.Context) ([]string, error) { return []string{a.ID}, nil }, time.Millisecond, time.Minute)
	ds, err := q.Receive(ctx, 10)
	if err != nil || len(ds) != 2 || ds[0].Grab.UserID != "u1" || ds[1].Grab.UserID != "u2" {
		t.Fatalf("Receive = %+v, %v; want the two grabs", ds, err)
	}
	if n := rdb.XLen(ctx, DeadKey(a.ID)).Val(); n != 1 {
		t.Fatalf("dead-letter stream has %d entries, want 1", n)
	}
	if err := q.Ack(ctx, ds); err != nil {
		t.Fatal(err)
	}
	if n, _ := q.Depth(ctx, a.ID); n != 0 {
		t.Fatalf("depth after ack = %d, want 0", n)
	}
}
