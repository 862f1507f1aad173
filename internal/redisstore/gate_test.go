package redisstore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/redistest"
	"seckill/internal/sale"

	"seckill/internal/saletest"
)

var t0 = saletest.T0

func item(id string, stock, limit int64) sale.Activity {
	return sale.Activity{ID: id, Name: id, Kind: sale.KindItem, Stock: stock, PriceCents: 100, PerUserLimit: limit,
		StartAt: t0, EndAt: t0.Add(time.Hour), PayWindow: time.Minute, Admission: sale.AdmitDirect}
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

// loadedGate is a gate on a fresh real Redis (no AOF) with a loaded.
func loadedGate(t *testing.T, a sale.Activity) (*Gate, redis.UniversalClient) {
	t.Helper()
	rdb := dial(t, redistest.Start(t, redistest.Options{}).URL())
	g := New(rdb)
	if err := g.Load(context.Background(), a, sale.GateState{}); err != nil {
		t.Fatal(err)
	}
	return g, rdb
}

// TestRetriedScriptTakesOneUnit runs the grab script twice with the same token, as go-redis does
// when a reply is lost: the second run answers the first grab and takes nothing.
func TestRetriedScriptTakesOneUnit(t *testing.T) {
	ctx := context.Background()
	a := item("retry", 5, 3)
	g, rdb := loadedGate(t, a)
	k := keysOf(a.ID)
	// run calls the script with one grab: token, user, key, now, start, end, limit, kind, price,
	// activity, "1" if a pass is required, the pass.
	run := func(args ...any) []any {
		t.Helper()
		pass, _ := args[11].(string)
		act, _ := args[9].(string)
		k := keysOf(act)
		keys := []string{k.stock, k.shares, k.held, k.answers, k.grabs, k.stream, k.pending, k.away, k.revision, k.reserved}
		idx := 0
		if pass != "" {
			keys, idx = append(keys, passKey(act, pass)), 11
		}
		res, err := grabScript.Run(ctx, rdb, keys, append(append([]any{}, args[4:11]...), "0", 1, "0", 0, args[0], args[1], args[2], args[3], idx, pass, "", 0, 0, 0)...).Slice()
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
	if n, _ := g.Remaining(ctx, a); n != 4 {
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
	if n, _ := g.Remaining(ctx, a); n != 4 {
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

// TestBatchAnswersEachGrabAsAlone: one call of the script with many grabs answers each as if it
// had run alone, in order, and a retry of the whole call takes nothing more. A traced grab's
// stream entry carries its traceparent, for the worker to continue its trace; a traceparent
// too long to be one refuses that grab.
func TestBatchAnswersEachGrabAsAlone(t *testing.T) {
	ctx := context.Background()
	a := item("batch", 3, 1)
	g, rdb := loadedGate(t, a)
	k := keysOf(a.ID)
	now := a.StartAt.UnixMilli()
	args := []any{a.StartAt.UnixMilli(), a.EndAt.UnixMilli(), 1, "item", 100, a.ID, "0", "0", 1, "0", 0}
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	grabs := []struct {
		token, user, key string
		want             int64
		wantToken        string
		parent           string
	}{
		{"t1", "u1", "", 0, "t1", ""},
		{"t2", "u1", "", -4, "", ""},       // the limit counts the grab before it in the batch
		{"t3", "u2", "k", 0, "t3", parent}, // a keyed grab, traced
		{"t4", "u2", "k", 1, "t3", ""},     // the same key again: the first answer
		{"", "u9", "", -9, "", ""},         // bad arguments refuse that grab only
		{"t8", "u6", "", -9, "", strings.Repeat("0", 129)},
		{"t5", "u3", "", 0, "t5", ""}, // the last unit
		{"t6", "u4", "", -5, "", ""},  // sold out
		{"t7", "u5", "k", -5, "", ""}, // sold out, keyed: nothing remembered
	}
	for _, gr := range grabs {
		args = append(args, gr.token, gr.user, gr.key, now, 0, "", gr.parent, 0, 0, 0)
	}
	keys := []string{k.stock, k.shares, k.held, k.answers, k.grabs, k.stream, k.pending, k.away, k.revision, k.reserved}
	for run := range 2 { // the second run is go-redis retrying the whole call
		res, err := grabScript.Run(ctx, rdb, keys, args...).Slice()
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 3*len(grabs) {
			t.Fatalf("run %d: %d values for %d grabs: %v", run, len(res), len(grabs), res)
		}
		for i, gr := range grabs {
			want := gr.want
			if run == 1 && want == 0 {
				want = 1 // granted the first time, the first answer now
			}
			if res[3*i] != want || res[3*i+1] != gr.wantToken {
				t.Errorf("run %d, grab %d (%s of %s): %v %v, want %d %q", run, i, gr.token, gr.user, res[3*i], res[3*i+1], want, gr.wantToken)
			}
		}
	}
	if n, _ := g.Remaining(ctx, a); n != 0 {
		t.Errorf("remaining = %d, want 0", n)
	}
	entries := rdb.XRange(ctx, k.stream, "-", "+").Val()
	if len(entries) != 3 {
		t.Errorf("stream has %d entries, want one per unit (3)", len(entries))
	}
	for _, e := range entries {
		gr, err := grabOfEntry(e)
		if want := map[string]string{"t3": parent}[gr.Token]; err != nil || gr.Trace != want {
			t.Errorf("the stream entry of %s: trace %q, %v; want %q", gr.Token, gr.Trace, err, want)
		}
	}
	if n := rdb.HLen(ctx, k.answers).Val(); n != 1 {
		t.Errorf("%d remembered keyed answers, want 1", n)
	}
}

// TestCoalescedCrowd: grabs of many goroutines through one gate leave in batches (the script's
// calls are fewer than the grabs) and the crowd gets exactly the stock, once per user, each
// duplicate click its first answer.
func TestCoalescedCrowd(t *testing.T) {
	ctx := context.Background()
	a := item("crowd", 300, 1)
	g, rdb := loadedGate(t, a)
	before, _ := scriptStats(t, rdb)
	const users = 1000
	type result struct {
		user  int
		token string
		err   error
	}
	results := make(chan result, 2*users)
	var wg sync.WaitGroup
	for u := range users {
		for range 2 { // every user clicks twice with the same key
			wg.Go(func() {
				gr, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: fmt.Sprint("u", u), IdempotencyKey: "click", Now: a.StartAt})
				results <- result{u, gr.Token, err}
			})
		}
	}
	wg.Wait()
	close(results)
	won := map[int]string{}
	for r := range results {
		switch {
		case r.err == nil:
			if first, ok := won[r.user]; ok && first != r.token {
				t.Fatalf("user %d won twice: %s and %s", r.user, first, r.token)
			}
			won[r.user] = r.token
		case errors.Is(r.err, sale.ErrSoldOut):
		default:
			t.Fatalf("user %d: %v", r.user, r.err)
		}
	}
	if len(won) != 300 {
		t.Fatalf("%d winners, want the stock (300)", len(won))
	}
	if n := rdb.XLen(ctx, keysOf(a.ID).stream).Val(); n != 300 {
		t.Errorf("stream has %d entries, want 300", n)
	}
	after, _ := scriptStats(t, rdb)
	calls := after - before
	t.Logf("%d grabs in %d script calls", 2*users, calls)
	if calls >= 2*users {
		t.Errorf("%d script calls for %d grabs: nothing was coalesced", calls, 2*users)
	}
}

// scriptStats reads how many script calls (EVALSHA and EVAL) Redis has run and the
// microseconds it spent in them.
func scriptStats(tb testing.TB, rdb redis.UniversalClient) (calls, usec int64) {
	tb.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		for _, cmd := range []string{"cmdstat_evalsha:", "cmdstat_eval:"} {
			rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd)
			if !ok {
				continue
			}
			for _, f := range strings.Split(rest, ",") {
				k, v, _ := strings.Cut(f, "=")
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil && (k == "calls" || k == "usec") {
					tb.Fatalf("commandstats line %q: %v", line, err)
				}
				switch k {
				case "calls":
					calls += n
				case "usec":
					usec += n
				}
			}
		}
	}
	return calls, usec
}

// TestScriptsSurviveAFlush: after SCRIPT FLUSH (what a failover to a fresh replica looks like to
// EVALSHA) grabs go on, the scripts being sent again.
func TestScriptsSurviveAFlush(t *testing.T) {
	ctx := context.Background()
	a := item("flush", 5, 1)
	g, rdb := loadedGate(t, a)
	if _, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: "u1", Now: a.StartAt}); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: "u2", Now: a.StartAt}); err != nil {
		t.Fatalf("grab after SCRIPT FLUSH: %v", err)
	}
}

// TestStreamCarriesEveryGrab: each grant is appended to the activity's stream by the same
// script, with what a worker needs to place the order.
func TestStreamCarriesEveryGrab(t *testing.T) {
	ctx := context.Background()
	a := item("stream", 3, 1)
	g, rdb := loadedGate(t, a)
	var tokens []string
	for _, u := range []string{"u1", "u2", "u3", "u4"} {
		gr, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: u, IdempotencyKey: "k|" + u, Now: a.StartAt})
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

// TestUnackedReadsALongStreamInPages: a stream longer than a page is read whole by Unacked, in
// order, each grab once, in pages of unackedPage.
func TestUnackedReadsALongStreamInPages(t *testing.T) {
	ctx := context.Background()
	n := 2*unackedPage + 17
	a := item("long", int64(n), 1)
	g, rdb := loadedGate(t, a)
	var wg sync.WaitGroup
	tokens := make([]string, n)
	for i := range n {
		wg.Go(func() {
			gr, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: fmt.Sprint("u", i), Now: a.StartAt})
			if err != nil {
				t.Error(err)
			}
			tokens[i] = gr.Token
		})
	}
	wg.Wait()
	q := NewQueue(rdb, "c", func(context.Context) ([]sale.Activity, error) { return []sale.Activity{a}, nil }, time.Millisecond, time.Minute)
	got, err := q.Unacked(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, gr := range got {
		if seen[gr.Token] {
			t.Fatalf("grab %s read twice", gr.Token)
		}
		seen[gr.Token] = true
	}
	for _, tok := range tokens {
		if !seen[tok] {
			t.Fatalf("grab %s missing from the %d read of %d", tok, len(got), n)
		}
	}
	if len(got) != n {
		t.Fatalf("read %d grabs, want %d", len(got), n)
	}
}

// TestPendingAsksOnlyTheOpenActivity: of 40 activities listed, each open a different hour, a
// pending grab is found by asking the one open at its token's time, in one HGET; a token of a
// time no activity was open at costs no command at all.
func TestPendingAsksOnlyTheOpenActivity(t *testing.T) {
	ctx := context.Background()
	rdb := dial(t, redistest.Start(t, redistest.Options{}).URL())
	g := New(rdb)
	var acts []sale.Activity
	for i := range 40 {
		a := item(fmt.Sprint("hour", i), 5, 1)
		a.StartAt, a.EndAt = t0.Add(time.Duration(i)*time.Hour), t0.Add(time.Duration(i+1)*time.Hour)
		if err := g.Load(ctx, a, sale.GateState{}); err != nil {
			t.Fatal(err)
		}
		acts = append(acts, a)
	}
	q := NewQueue(rdb, "c", func(context.Context) ([]sale.Activity, error) { return acts, nil }, time.Millisecond, time.Minute)
	at := acts[7].StartAt.Add(30 * time.Minute)
	gr, err := g.Grab(ctx, acts[7], sale.GrabRequest{ActivityID: acts[7].ID, UserID: "u", Now: at})
	if err != nil {
		t.Fatal(err)
	}
	if tat, ok := sale.GrabTokenTime(gr.Token); !ok || !tat.Equal(at) {
		t.Fatalf("the token %s says %v, %v; want the grab's time %v", gr.Token, tat, ok, at)
	}
	if _, err := q.Pending(ctx, "warm the listing"); !errors.Is(err, sale.ErrNotFound) {
		t.Fatalf("Pending of a non-token: %v", err)
	}
	hgets := func() int {
		info, err := rdb.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`cmdstat_hget:calls=(\d+)`).FindStringSubmatch(info)
		if m == nil {
			return 0
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	before := hgets()
	p, err := q.Pending(ctx, gr.Token)
	if err != nil || p.Token != gr.Token || p.ActivityID != acts[7].ID || p.UserID != "u" {
		t.Fatalf("Pending(%s) = %+v, %v", gr.Token, p, err)
	}
	if n := hgets() - before; n != 1 {
		t.Fatalf("Pending asked %d HGETs for one of 40 activities, want 1", n)
	}
	before = hgets()
	if _, err := q.Pending(ctx, sale.NewGrabToken(t0.Add(-time.Hour))); !errors.Is(err, sale.ErrNotFound) {
		t.Fatalf("Pending of a token from before every window: %v, want ErrNotFound", err)
	}
	if n := hgets() - before; n != 0 {
		t.Fatalf("a token no activity was open for cost %d HGETs", n)
	}
}

// TestQueueSkipsArchivedActivities: a worker's queue listing an archived activity neither reads
// nor recreates its dropped stream (ensuring the group would make it again).
func TestQueueSkipsArchivedActivities(t *testing.T) {
	ctx := context.Background()
	a := item("gone", 3, 1)
	g, rdb := loadedGate(t, a)
	if err := g.Drop(ctx, a); err != nil {
		t.Fatal(err)
	}
	archived := a
	archived.ArchivedAt = t0.Add(2 * time.Hour)
	q := NewQueue(rdb, "c", func(context.Context) ([]sale.Activity, error) { return []sale.Activity{archived}, nil }, time.Millisecond, time.Minute)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if ds, err := q.Receive(short, 10); len(ds) != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Receive over an archived activity: %v, %v; want nothing until the deadline", ds, err)
	}
	if n, err := rdb.Exists(ctx, StreamKey(a.ID)).Result(); err != nil || n != 0 {
		t.Fatalf("the archived activity's stream exists again (%d, %v)", n, err)
	}
}

func TestDialRefusesBadSpecs(t *testing.T) {
	for _, spec := range []string{"redis://:bad:port/x", "localhost", "nohost,alsono"} {
		if _, err := Dial(context.Background(), spec); !errors.Is(err, sale.ErrInvalid) {
			t.Errorf("Dial(%q) = %v, want ErrInvalid", spec, err)
		}
	}
}

func TestParseSpec(t *testing.T) {
	for _, c := range []struct {
		spec string
		want Spec // TLS compared by presence only
		tls  bool
	}{
		{"redis://127.0.0.1:6379/2", Spec{Kind: KindServer, Addrs: []string{"127.0.0.1:6379"}, DB: 2}, false},
		{"redis://127.0.0.1:6379", Spec{Kind: KindServer, Addrs: []string{"127.0.0.1:6379"}}, false},
		{"rediss://app:s%3Acret@r.example:6380/0", Spec{Kind: KindServer, Addrs: []string{"r.example:6380"}, Username: "app", Password: "s:cret"}, true},
		{"127.0.0.1:7001,127.0.0.1:7002", Spec{Kind: KindCluster, Addrs: []string{"127.0.0.1:7001", "127.0.0.1:7002"}}, false},
		{"redis://app:pw@10.0.0.1:7001,10.0.0.2:7001", Spec{Kind: KindCluster, Addrs: []string{"10.0.0.1:7001", "10.0.0.2:7001"}, Username: "app", Password: "pw"}, false},
		{"rediss://:pw@10.0.0.1:7001,10.0.0.2:7001/0", Spec{Kind: KindCluster, Addrs: []string{"10.0.0.1:7001", "10.0.0.2:7001"}, Password: "pw"}, true},
		{"sentinel://127.0.0.1:26379,127.0.0.1:26380/seckill", Spec{Kind: KindSentinel, Addrs: []string{"127.0.0.1:26379", "127.0.0.1:26380"}, Master: "seckill"}, false},
		{"sentinels://app:pw@s1:26379/main?db=3&sentinel_password=sp", Spec{Kind: KindSentinel, Addrs: []string{"s1:26379"}, Master: "main", DB: 3,
			Username: "app", Password: "pw", SentinelPassword: "sp"}, true},
	} {
		got, err := ParseSpec(c.spec)
		if err != nil {
			t.Errorf("ParseSpec(%q): %v", c.spec, err)
			continue
		}
		if (got.TLS != nil) != c.tls {
			t.Errorf("ParseSpec(%q): TLS %v, want %v", c.spec, got.TLS != nil, c.tls)
		}
		got.TLS = nil
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseSpec(%q) = %+v, want %+v", c.spec, got, c.want)
		}
	}
	for _, spec := range []string{"", "localhost", "redis://", "redis://h", "redis://h:0", "redis://h:99999", "redis://h:1/x",
		"http://h:1", "sentinel://h:1", "sentinel://h:1/", "h:1,h:2/3", "user:pw@h:1,h:2", "redis://h:1?nope=1",
		"redis://h:1?ca=/etc/hosts", "rediss://h:1?ca=/nonexistent", "rediss://h:1?ca=/etc/hostname", "redis://h:1,h:2/1",
		"sentinel://h:1/m?db=x", "redis://h:1/-1", "redis://%zz@h:1"} {
		if _, err := ParseSpec(spec); !errors.Is(err, sale.ErrInvalid) {
			t.Errorf("ParseSpec(%q) = %v, want ErrInvalid", spec, err)
		}
	}
	if _, err := ParseSpec("redis://app:hunter2@h:1,h:2/5"); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("a refused spec's error shows its password: %v", err)
	}
}

// FuzzParseSpec: any SECKILL_REDIS is parsed or refused with ErrInvalid, never a panic, and
// what is parsed has an address for every node and a kind.
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{"redis://127.0.0.1:6379/0", "h:1,h:2", "rediss://u:p@h:1,h:2", "sentinel://h:1,h:2/m?db=1",
		"redis://:@h:1", "redis://h:1?ca=", "sentinels://h:1/m?sentinel_user=u"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := ParseSpec(spec)
		if err != nil {
			if !errors.Is(err, sale.ErrInvalid) {
				t.Fatalf("ParseSpec(%q): %v, not ErrInvalid", spec, err)
			}
			return
		}
		if len(s.Addrs) == 0 || s.Kind == "" || s.Kind == KindSentinel && s.Master == "" {
			t.Fatalf("ParseSpec(%q) = %+v: incomplete", spec, s)
		}
	})
}

// TestMalformedEntriesAreBuried: an entry that is not a grab goes to the dead-letter stream
// instead of stalling the workers, and the grabs around it are delivered.
func TestMalformedEntriesAreBuried(t *testing.T) {
	ctx := context.Background()
	a := item("dl", 5, 1)
	g, rdb := loadedGate(t, a)
	if _, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: "u1", Now: a.StartAt}); err != nil {
		t.Fatal(err)
	}
	if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: StreamKey(a.ID), Values: map[string]any{"junk": "1"}}).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: "u2", Now: a.StartAt}); err != nil {
		t.Fatal(err)
	}
	q := NewQueue(rdb, "c", func(context.Context) ([]sale.Activity, error) { return []sale.Activity{a}, nil }, time.Millisecond, time.Minute)
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
	if n, _ := q.Depth(ctx, a); n != 0 {
		t.Fatalf("depth after ack = %d, want 0", n)
	}
}

// TestSpentPassUnderRetry runs spend.lua twice with one spend's id, as go-redis does when a reply
// is lost: the retry is told "spent" again, not refused; any other spend, and a grab, are refused.
func TestSpentPassUnderRetry(t *testing.T) {
	ctx := context.Background()
	a := item("spend", 5, 1)
	g, rdb := loadedGate(t, a)
	if err := g.IssuePass(ctx, a, "u1", "p1", t0, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	key := []string{passKey(a.ID, "p1")}
	spend := func(user, id string) int64 {
		t.Helper()
		n, err := spendScript.Run(ctx, rdb, key, user, t0.UnixMilli(), id).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := spend("u2", "s0"); n != 0 {
		t.Fatalf("another user's spend: %d, want 0", n)
	}
	if first, retry := spend("u1", "s1"), spend("u1", "s1"); first != 1 || retry != 1 {
		t.Fatalf("a spend and its retry: %d, %d; want 1 and 1", first, retry)
	}
	if n := spend("u1", "s2"); n != 0 {
		t.Fatalf("a second spend of a spent pass: %d, want 0", n)
	}
	if _, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: "u1", Pass: "p1", Now: t0}); !errors.Is(err, sale.ErrChallengeRequired) {
		t.Fatalf("a grab with the spent pass: %v, want ErrChallengeRequired", err)
	}
}

// TestUserRateInTheGrab: the user's request bucket is checked and spent by the grab's own
// script. A burst of five grabs at 2 a second with a burst of 2, coalesced into calls, wins two;
// the three others are Throttled with a wait of at most a second, and take nothing. Another
// user's bucket is their own; a keyed retry gets its first answer without spending; after the
// wait one more request passes; and the bucket's key expires by itself.
func TestUserRateInTheGrab(t *testing.T) {
	ctx := context.Background()
	a := item("rate", 100, 100)
	g, rdb := loadedGate(t, a)
	rate := sale.UserRate{PerSecond: 2, Burst: 2}
	grab := func(user, key string) (sale.Grab, error) {
		return g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: user, IdempotencyKey: key, Now: t0.Add(time.Second), UserRate: rate})
	}
	type result struct {
		g   sale.Grab
		err error
	}
	results := make(chan result, 5)
	for i := range 5 {
		go func() {
			gr, err := grab("u1", fmt.Sprint("k", i))
			results <- result{gr, err}
		}()
	}
	var won, throttled int
	var firstKeyed sale.Grab
	for range 5 {
		r := <-results
		var th sale.Throttled
		switch {
		case r.err == nil:
			won++
			firstKeyed = r.g
		case errors.As(r.err, &th) && errors.Is(r.err, sale.ErrRateLimited):
			throttled++
			if th.RetryAfter <= 0 || th.RetryAfter > time.Second {
				t.Errorf("wait %s, want within (0, 1s]", th.RetryAfter)
			}
		default:
			t.Fatalf("a grab of the burst: %v", r.err)
		}
	}
	if won != 2 || throttled != 3 {
		t.Fatalf("won %d, throttled %d of 5 at a burst of 2; want 2 and 3", won, throttled)
	}
	if n, err := g.Remaining(ctx, a); err != nil || n != 98 {
		t.Fatalf("remaining %d (%v), want 98: a throttled grab takes nothing", n, err)
	}
	if _, err := grab("u2", ""); err != nil {
		t.Fatalf("another user's first grab: %v", err)
	}
	// The first answer of a key again: answered before the bucket, so it spends nothing.
	again, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: "u1", IdempotencyKey: firstKeyed.IdempotencyKey,
		Now: t0.Add(time.Second), UserRate: rate})
	if err != nil || again.Token != firstKeyed.Token {
		t.Fatalf("a keyed retry: %v %v, want the first grab %s", again.Token, err, firstKeyed.Token)
	}
	ttl, err := rdb.PTTL(ctx, rateKey(a.ID, "u1")).Result()
	if err != nil || ttl <= 0 || ttl > time.Second+10*time.Millisecond {
		t.Fatalf("the bucket's TTL %s (%v), want within a second", ttl, err)
	}
	var th sale.Throttled
	if _, err := grab("u1", "k-later"); !errors.As(err, &th) {
		t.Fatalf("right after the burst: %v, want Throttled", err)
	}
	time.Sleep(th.RetryAfter)
	if _, err := grab("u1", "k-later"); err != nil {
		t.Fatalf("after the wait of %s: %v", th.RetryAfter, err)
	}
}

// TestAbandonedGrabsAreNotSent: Redis stops (SIGSTOP) with a grab on its way; the grabs that
// queue behind it give up (their callers answered BUSY) before it comes back. They are not sent
// once it does: only the grab on its way takes a unit.
func TestAbandonedGrabsAreNotSent(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	g := New(dial(t, srv.URL())).WithBatching(Batching{MaxBatch: 16, InFlight: 1})
	a := item("abandoned", 100, 1)
	if err := g.Load(ctx, a, sale.GateState{}); err != nil {
		t.Fatal(err)
	}
	srv.Pause(t)
	first := make(chan error, 1)
	go func() {
		_, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: "first", Now: a.StartAt})
		first <- err
	}()
	time.Sleep(100 * time.Millisecond) // the first grab is the lane's one sender, stuck on Redis
	for i := range 20 {
		gone, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		_, err := g.Grab(gone, a, sale.GrabRequest{ActivityID: a.ID, UserID: fmt.Sprint("gone-", i), Now: a.StartAt})
		cancel()
		if !errors.Is(err, sale.ErrBusy) {
			t.Fatalf("a grab whose caller gave up: %v, want busy", err)
		}
	}
	srv.Resume(t)
	if err := <-first; err != nil {
		t.Fatalf("the grab on its way when Redis stopped: %v", err)
	}
	// Whatever was left in the lane is sent (or not) by a sender of its own: wait until it is idle.
	for deadline := time.Now().Add(10 * time.Second); ; {
		idle := true
		g.lanes.Range(func(_, v any) bool {
			l := v.(*lane)
			l.mu.Lock()
			idle = idle && l.flying == 0 && len(l.queue) == 0
			l.mu.Unlock()
			return true
		})
		if idle {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lane is still busy 10 s after Redis came back")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n, err := g.Remaining(ctx, a); err != nil || n != 99 {
		t.Fatalf("remaining %d, %v; want 99: only the grab on its way took a unit", n, err)
	}
}
