package httpapi_test

import (
	"context"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"seckill/internal/sale"
)

// queueItem is a queue item of stock 2 and a cap of 3 waiting tickets, starting at 12:30 (the
// fixture's clock reads 12:00).
const queueItem = `{"name":"Queue","kind":"item","stock":2,"price_cents":500,"admission":"queue","queue_cap":3,
	"start_at":"2001-11-30T12:30:00Z","end_at":"2001-11-30T13:00:00Z"}`

// TestQueueOverHTTP follows a queue activity through the API: joins answered with a ticket, the
// cap, a second join, a join sent again with its Idempotency-Key (answered its ticket as it stands,
// even after the sell-out), the ticket's owner alone seeing it, polls rate limited, the commitment
// before the draw and the seed and entries after it, and the outcomes.
func TestQueueOverHTTP(t *testing.T) {
	f := newFixture(t, false)
	id := f.create(queueItem)
	join := func(user string, header ...string) response {
		return f.do("POST", "/api/activities/"+id+"/grab", f.user(user), "", header...)
	}
	alice := join("alice", "Idempotency-Key", "click-1")
	if alice.status != 202 || alice.body["status"] != "JOINED" || alice.body["position"] != nil || alice.body["early"] != true ||
		alice.body["estimated_wait_s"].(float64) < 1800 || alice.body["admission"] != "queue" {
		t.Fatalf("alice joins: %d %s", alice.status, alice.raw)
	}
	token := alice.body["queue_token"].(string)
	if again := join("alice"); again.status != 202 || again.body["status"] != "ALREADY_QUEUED" || again.body["queue_token"] != token {
		t.Fatalf("alice again: %d %s, want her ticket back", again.status, again.raw)
	}
	if again := join("alice", "Idempotency-Key", "click-1"); again.status != 202 || again.body["status"] != "JOINED" || again.body["queue_token"] != token {
		t.Fatalf("alice's click sent again: %d %s, want her first answer", again.status, again.raw)
	}
	join("bob")
	join("carol")
	if full := join("dave"); full.status != 429 || full.code() != "QUEUE_FULL" || full.header.Get("Retry-After") == "" {
		t.Fatalf("a fourth join over the cap of 3: %d %s", full.status, full.raw)
	}

	poll := func(user, tok string) response {
		return f.do("GET", "/api/queue/"+url.PathEscape(tok), f.user(user), "")
	}
	if r := poll("alice", token); r.status != 200 || r.body["status"] != "WAITING" || r.body["queue_token"] != token || r.body["waiting"] != 3.0 {
		t.Fatalf("alice's ticket: %d %s", r.status, r.raw)
	}
	random, _, _ := strings.Cut(token, ".")
	other := f.create(validItem)
	for name, r := range map[string]response{
		"another user's ticket":           poll("bob", token),
		"a forged ticket":                 poll("alice", "qAAAAAAAAAAAAAAAAAAAAAAAA."+id),
		"the ticket of another activity":  poll("alice", random+"."+other),
		"a ticket of no activity":         poll("alice", random),
		"a ticket of an invalid activity": poll("alice", random+"./.."),
		"an overlong ticket":              poll("alice", strings.Repeat("q", 200)+"."+id),
	} {
		if r.status != 404 || r.code() != "NOT_FOUND" {
			t.Errorf("%s: %d %s, want 404 NOT_FOUND", name, r.status, r.raw)
		}
	}
	if r := f.do("GET", "/api/queue/"+token, "", ""); r.status != 401 {
		t.Errorf("a poll without a token: %d %s", r.status, r.raw)
	}
	limited := 0
	for range 40 {
		if r := poll("erin", token); r.status == 429 {
			limited++
			if r.code() != "RATE_LIMITED" || r.header.Get("Retry-After") == "" {
				t.Fatalf("a refused poll: %d %s", r.status, r.raw)
			}
		}
	}
	if limited < 30 {
		t.Errorf("a storm of 40 polls: %d refused, want all but a burst of 8 (and what a second adds)", limited)
	}

	view := f.do("GET", "/api/activities/"+id, "", "")
	line, _ := view.body["line"].(map[string]any)
	commitment, _ := line["draw_commitment"].(string)
	if view.body["admission"] != "queue" || len(commitment) != 64 || line["draw_seed"] != nil || line["waiting"] != 3.0 {
		t.Fatalf("public view before the draw: %s", view.raw)
	}
	if r := f.do("GET", "/api/activities/"+id+"/entries", "", ""); r.status != 403 || r.code() != "NOT_STARTED" {
		t.Fatalf("entries before the draw: %d %s", r.status, r.raw)
	}

	f.clock.Advance(31 * time.Minute) // past the start: the draw
	drain(t, f, id)
	view = f.do("GET", "/api/activities/"+id, "", "")
	line = view.body["line"].(map[string]any)
	seed, err := sale.ParseSeed(line["draw_seed"].(string))
	if err != nil || seed.Commitment() != commitment || line["waiting"] != 0.0 {
		t.Fatalf("public view after the draw: %s (%v)", view.raw, err)
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, httptest.NewRequest("GET", line["entries_url"].(string), nil))
	entries := strings.Fields(rec.Body.String())
	if rec.Code != 200 || len(entries) != 3 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
		t.Fatalf("entries: %d %q", rec.Code, rec.Body)
	}
	won := 0
	for _, tok := range sale.DrawOrder(seed, entries)[:2] {
		for _, u := range []string{"alice", "bob", "carol"} {
			if r := poll(u, tok); r.status == 200 {
				if r.body["status"] != "WON" || r.body["order_token"] == nil || r.body["position"] != nil {
					t.Fatalf("drawn first, %s's ticket: %s", u, r.raw)
				}
				won++
			}
		}
	}
	if won != 2 {
		t.Fatalf("%d of the draw's first two tickets found won", won)
	}
	if r := join("frank"); r.status != 410 || r.code() != "SOLD_OUT" {
		t.Fatalf("a join after the sell-out: %d %s", r.status, r.raw)
	}
	if r := join("frank", "Idempotency-Key", "click-9"); r.status != 410 || r.code() != "SOLD_OUT" {
		t.Fatalf("a keyed join that took no ticket, after the sell-out: %d %s", r.status, r.raw)
	}
	// Alice's click sent again after the sell-out: her ticket as it stands, won or not.
	now, err := f.lines.Ticket(context.Background(), "alice", token)
	if err != nil || now.Outcome == sale.OutcomeWaiting {
		t.Fatalf("alice's ticket after the sell-out: %+v, %v", now, err)
	}
	var order any // the JSON's order_token: none unless won
	if now.OrderToken != "" {
		order = now.OrderToken
	}
	again := join("alice", "Idempotency-Key", "click-1")
	if again.status != 202 || again.body["queue_token"] != token || again.body["status"] != string(now.Outcome) ||
		again.body["order_token"] != order {
		t.Fatalf("alice's click sent again after the sell-out: %d %s; her ticket: %+v", again.status, again.raw, now)
	}
}

// drain runs two rounds of a drainer over the line of activity id: the draw, and the admissions.
func drain(t *testing.T, f *fixture, id string) {
	t.Helper()
	a, err := f.svc.Activity(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	d := f.lines.NewDrainer("test", 100*time.Millisecond)
	for range 2 {
		if _, err := d.Round(context.Background(), a); err != nil {
			t.Fatalf("a round of the line: %v", err)
		}
	}
}

// TestChallengeBeforeTheLine: a queue that asks for a challenge takes no bare join; a challenge
// solved before the start earns a pass that joins once, through the hidden path; the pass cannot
// be shown again, nor by anyone else; a click sent again with its key needs no pass, a new key
// does; once joined, a new pass gives the user's ticket back; and at
// the start the line admits the ticket, whose grab needs no pass (the join spent it).
func TestChallengeBeforeTheLine(t *testing.T) {
	f := newFixture(t, false)
	id := f.create(strings.Replace(queueItem, `"queue_cap":3`, `"queue_cap":3,"require_challenge":true`, 1))
	alice, mallory := f.user("alice"), f.user("mallory")
	if r := f.do("POST", "/api/activities/"+id+"/grab", alice, ""); r.status != 403 || r.code() != "CHALLENGE_REQUIRED" {
		t.Fatalf("a bare join: %d %s", r.status, r.raw)
	}
	pass := f.solve(id, alice, 0) // at 12:00, half an hour before the start
	path, _ := pass.body["grab_path"].(string)
	if pass.status != 200 || path == "" {
		t.Fatalf("a challenge solved before the start of a line: %d %s", pass.status, pass.raw)
	}
	if r := f.do("POST", path, mallory, ""); r.status != 403 || r.code() != "CHALLENGE_REQUIRED" {
		t.Fatalf("alice's path shown by mallory: %d %s", r.status, r.raw)
	}
	first := f.do("POST", path, alice, "", "Idempotency-Key", "click-1")
	if first.status != 202 || first.body["status"] != "JOINED" {
		t.Fatalf("alice joins through her path: %d %s", first.status, first.raw)
	}
	// Her click sent again (its answer lost) needs no pass: its key took the ticket. A new key does.
	if r := f.do("POST", "/api/activities/"+id+"/grab", alice, "", "Idempotency-Key", "click-1"); r.status != 202 ||
		r.body["status"] != "JOINED" || r.body["queue_token"] != first.body["queue_token"] {
		t.Fatalf("alice's click sent again without its path: %d %s", r.status, r.raw)
	}
	if r := f.do("POST", "/api/activities/"+id+"/grab", alice, "", "Idempotency-Key", "click-2"); r.status != 403 || r.code() != "CHALLENGE_REQUIRED" {
		t.Fatalf("a bare join with a new key: %d %s", r.status, r.raw)
	}
	if r := f.do("POST", path, alice, ""); r.status != 403 || r.code() != "CHALLENGE_REQUIRED" {
		t.Fatalf("the path again: %d %s", r.status, r.raw)
	}
	again := f.do("POST", f.solve(id, alice, 0).body["grab_path"].(string), alice, "")
	if again.status != 202 || again.body["status"] != "ALREADY_QUEUED" || again.body["queue_token"] != first.body["queue_token"] {
		t.Fatalf("alice with a new pass: %d %s, want her ticket back", again.status, again.raw)
	}
	if st, err := f.svc.Stats(context.Background(), id); err != nil || st.Line.Joined != 1 {
		t.Fatalf("stats %+v %v: want one ticket", st.Line, err)
	}
	f.clock.Advance(31 * time.Minute)
	drain(t, f, id)
	v, err := f.lines.Ticket(context.Background(), "alice", first.body["queue_token"].(string))
	if err != nil || v.Outcome != sale.OutcomeWon || v.OrderToken == "" {
		t.Fatalf("alice's ticket after the start: %+v, %v; want it won", v, err)
	}
}

// TestLineSettingsAreChecked refuses settings that make no sense for an admission mode.
func TestLineSettingsAreChecked(t *testing.T) {
	f := newFixture(t, false)
	for name, body := range map[string]string{
		"a cap on direct admission": strings.Replace(validItem, `"stock":2`, `"stock":2,"queue_cap":5`, 1),
		"a rate on direct":          strings.Replace(validItem, `"stock":2`, `"stock":2,"admit_rate":5`, 1),
		"a negative cap":            strings.Replace(queueItem, `"queue_cap":3`, `"queue_cap":-3`, 1),
		"an admit rate too high":    strings.Replace(queueItem, `"queue_cap":3`, `"admit_rate":2000000`, 1),
	} {
		if r := f.do("POST", "/api/admin/activities", adminToken, body); r.status != 400 || r.code() != "INVALID_ARGUMENT" {
			t.Errorf("%s: %d %s, want 400 INVALID_ARGUMENT", name, r.status, r.raw)
		}
	}
	if f.activities() != 0 {
		t.Fatalf("refused bodies created %d activities", f.activities())
	}
}

// FuzzTicketPoll asks for arbitrary ticket tokens as a user with a ticket: the answer is the
// user's own ticket (200), 404, or a rate limit, with an error code; never a 500.
func FuzzTicketPoll(f *testing.F) {
	fx := newFixture(f, false)
	id := fx.create(queueItem)
	alice := fx.user("alice")
	r := fx.do("POST", "/api/activities/"+id+"/grab", alice, "")
	token, _ := r.body["queue_token"].(string)
	for _, s := range []string{token, "", ".", "q." + id, token + "x", "%00", "..", strings.Repeat(".", 100), "q\xff." + id} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		req := httptest.NewRequest("GET", "/api/queue/x", nil)
		req.URL.Path = "/api/queue/" + tok
		req.URL.RawPath = "/api/queue/" + url.PathEscape(tok)
		req.Header["Authorization"] = []string{"Bearer " + alice}
		rec := httptest.NewRecorder()
		fx.h.ServeHTTP(rec, req)
		switch {
		case rec.Code == 200 && tok == token:
		case rec.Code == 404, rec.Code == 429, rec.Code == 301, rec.Code == 307:
		default:
			t.Fatalf("poll %q: status %d %s", tok, rec.Code, rec.Body)
		}
		if rec.Code >= 400 && !strings.Contains(rec.Body.String(), `"code":"`) {
			t.Fatalf("status %d without an error code: %s", rec.Code, rec.Body)
		}
	})
}
