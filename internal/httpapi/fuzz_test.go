package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"seckill/internal/httpapi/wire"
	"seckill/internal/risk"
)

// FuzzCreateActivity sends arbitrary bodies to the create endpoint: the answer is always a JSON
// 201, 400 or 413, and only a 201 adds an activity.
func FuzzCreateActivity(f *testing.F) {
	for _, s := range []string{validItem, ``, `{}`, `null`, `[]`, `{"name":1}`, `{"stock":-1}`,
		`{"name":"RP","kind":"redpacket","count":3,"total_cents":300,"start_at":"2001-11-30T11:00:00Z","end_at":"2001-11-30T13:00:00Z"}`,
		strings.Replace(validItem, `"stock":2`, `"stock":1e400`, 1), `{"name":"x"}{"name":"y"}`, "\xff\xfe"} {
		f.Add(s)
	}
	fx := newFixture(f, false)
	f.Fuzz(func(t *testing.T, body string) {
		fx.t = t
		before := fx.activities()
		r := fx.do("POST", "/api/admin/activities", adminToken, body)
		after := fx.activities()
		switch r.status {
		case http.StatusCreated:
			if after != before+1 {
				t.Fatalf("201 but %d activities became %d", before, after)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			if r.code() == "" {
				t.Fatalf("%d without an error code: %s", r.status, r.raw)
			}
			if after != before {
				t.Fatalf("refused body %q changed the activities: %d -> %d", body, before, after)
			}
		default:
			t.Fatalf("body %q: status %d %s", body, r.status, r.raw)
		}
	})
}

// FuzzGrabRequest sends grabs with arbitrary activity ids, idempotency keys, bearer tokens and
// bodies: the answer is always one of the grab's documented statuses with an error code, never a
// 500, and a grab is taken only with no body or an empty JSON object.
func FuzzGrabRequest(f *testing.F) {
	f.Add("x", "", "", "")
	f.Add("nope", "key-1", "bearer", "{}")
	f.Add("../admin", "k k", "a.b.c", "{not json")
	f.Add("%00", "\x00", "\xff", `{"quantity":2}`)
	fx := newFixture(f, false)
	id := fx.create(validItem)
	alice := fx.user("alice")
	f.Add(id, "k", "alice", "")
	f.Add(id, "k", "alice", " {} ")
	f.Add(id, "k2", "alice", "null")
	f.Add(id, "k3", "alice", `{"quantity":2}`)
	f.Add(id, "k4", "alice", "[]")
	f.Add(id, "k5", "alice", "{} {}")
	f.Add(id, "k6", "alice", `{"`+strings.Repeat("a", 2000)+`":1}`)
	f.Add(id, "k7", "alice", `{"signals":{"moves":12,"path_px":300.5,"direction_entropy":1.9,"speed_cv":0.7,"touch":false,"load_to_click_ms":4100,"fingerprint":"0123456789abcdef"}}`)
	f.Add(id, "k8", "alice", `{"signals":{"moves":-1,"path_px":0,"direction_entropy":0,"speed_cv":0,"touch":true,"load_to_click_ms":0}}`)
	f.Add(id, "k9", "alice", `{"signals":{"moves":0,"path_px":1e400,"direction_entropy":0,"speed_cv":0,"touch":false,"load_to_click_ms":0}}`)
	f.Add(id, "k10", "alice", `{"signals":null}`)
	f.Fuzz(func(t *testing.T, act, key, bearer, body string) {
		req := httptest.NewRequest("POST", "/api/activities/x/grab", strings.NewReader(body))
		req.URL.Path = "/api/activities/" + act + "/grab"
		req.URL.RawPath = "/api/activities/" + url.PathEscape(act) + "/grab"
		if bearer == "alice" {
			bearer = alice
		}
		req.Header["Authorization"] = []string{"Bearer " + bearer}
		req.Header["Idempotency-Key"] = []string{key}
		rec := httptest.NewRecorder()
		fx.h.ServeHTTP(rec, req)
		switch {
		case rec.Code == 307 && path.Clean(req.URL.Path) != req.URL.Path:
			return // the mux sends an unclean path ("/api/activities/./grab") to its clean form
		case !slices.Contains([]int{202, 400, 401, 403, 404, 405, 409, 410, 413}, rec.Code):
			t.Fatalf("grab %q key %q: status %d %s", act, key, rec.Code, rec.Body)
		}
		if rec.Code != 202 && !strings.Contains(rec.Body.String(), `"code":"`) {
			t.Fatalf("status %d without an error code: %s", rec.Code, rec.Body)
		}
		if rec.Code == 202 && body != "" && strings.TrimSpace(body) != "{}" {
			// Taken with a body: it must be the grab's object, its signals ones a page measures.
			dec := json.NewDecoder(strings.NewReader(body))
			dec.DisallowUnknownFields()
			var b wire.GrabBody
			if err := dec.Decode(&b); err != nil {
				t.Fatalf("a grab with the body %q was taken: %v", body, err)
			}
			if s := b.Signals; s != nil {
				p := risk.Page{Moves: s.Moves, PathPx: s.PathPx, DirectionEntropy: s.DirectionEntropy, SpeedCV: s.SpeedCV,
					LoadToClick: time.Duration(s.LoadToClickMs) * time.Millisecond, Fingerprint: s.Fingerprint}
				if err := p.Check(); err != nil || s.LoadToClickMs < 0 {
					t.Fatalf("a grab with the signals %q was taken: %v", body, err)
				}
			}
		}
	})
}

// FuzzBlockRequest posts arbitrary blacklist entries: each is stored (201, one more entry) or
// refused with a stable code (400, nothing written); never anything else.
func FuzzBlockRequest(f *testing.F) {
	for _, s := range []string{`{"kind":"user","value":"bot"}`, `{"kind":"ip","value":"203.0.113.0/24","until":"2001-12-01T00:00:00Z"}`,
		`{"kind":"ip","value":"::ffff:10.0.0.1"}`, `{"kind":"ip","value":"fe80::1%eth0"}`, `{}`, `null`, `{"kind":"user"}`,
		`{"kind":"user","value":"x","until":"2001-11-30T11:00:00Z"}`, "\xff"} {
		f.Add(s)
	}
	fx := newFixture(f, false)
	count := func() int {
		bs, err := fx.store.Blocks(context.Background(), fx.clock.Now())
		if err != nil {
			fx.t.Fatal(err)
		}
		return len(bs)
	}
	f.Fuzz(func(t *testing.T, body string) {
		fx.t = t
		before := count()
		r := fx.do("POST", "/api/admin/blocks", adminToken, body)
		after := count()
		switch r.status {
		case http.StatusCreated:
			if after < before || after > before+1 { // a replaced entry keeps the count
				t.Fatalf("201 but %d entries became %d", before, after)
			}
		case http.StatusBadRequest:
			if r.code() == "" || after != before {
				t.Fatalf("refused body %q: code %q, entries %d -> %d", body, r.code(), before, after)
			}
		default:
			t.Fatalf("body %q: status %d %s", body, r.status, r.raw)
		}
	})
}

// FuzzChallengeAnswer posts arbitrary answers and path tokens for a guarded activity: nothing but
// a right answer earns a path, no made-up path grabs, and every refusal has a stable code.
func FuzzChallengeAnswer(f *testing.F) {
	for _, s := range []string{`{}`, `{"challenge_id":"c1","answer":7}`, `{"challenge_id":"","answer":-1}`,
		`{"challenge_id":"c1","answer":1e30}`, `{"challenge_id":"\u0000","answer":0}`, "\xff"} {
		f.Add(s, "p-made-up")
	}
	fx := newFixture(f, false)
	id := fx.create(guardedItem)
	alice := fx.user("alice")
	f.Fuzz(func(t *testing.T, body, pass string) {
		fx.t = t
		r := fx.do("POST", "/api/activities/"+id+"/challenge/answer", alice, body)
		switch r.status {
		case http.StatusBadRequest, http.StatusForbidden, http.StatusRequestEntityTooLarge:
			if r.code() == "" {
				t.Fatalf("status %d without an error code: %s", r.status, r.raw)
			}
		default: // no challenge was ever put, so no answer can be right
			t.Fatalf("answer %q: status %d %s", body, r.status, r.raw)
		}
		req := httptest.NewRequest("POST", "/api/activities/x/grab/y", nil)
		req.URL.Path = "/api/activities/" + id + "/grab/" + pass
		req.URL.RawPath = "/api/activities/" + id + "/grab/" + url.PathEscape(pass)
		req.Header["Authorization"] = []string{"Bearer " + alice}
		rec := httptest.NewRecorder()
		fx.h.ServeHTTP(rec, req)
		switch rec.Code {
		case 403, 404, 405: // refused
		case 301, 307: // a path like "." or "a/../b": the mux redirects to the clean path
		default:
			t.Fatalf("grab with pass %q: status %d %s", pass, rec.Code, rec.Body)
		}
		if rem, err := fx.svc.Remaining(context.Background(), id); err != nil || rem != 3 {
			t.Fatalf("remaining %d, %v after a grab with pass %q; want all 3", rem, err, pass)
		}
	})
}

// FuzzLeaderboardQuery asks a red packet's leaderboard with arbitrary query strings: the answer is
// a 200 with at most 100 entries in rank order, or a 400 with a code; never anything else.
func FuzzLeaderboardQuery(f *testing.F) {
	for _, q := range []string{"", "limit=10", "limit=0", "limit=101", "limit=-1", "limit=1e3", "limit=%00", "limit=5&limit=6", "x=1"} {
		f.Add(q)
	}
	fx := newFixture(f, false)
	id := fx.create(redPacket)
	for i := range 3 {
		fx.do("POST", "/api/activities/"+id+"/grab", fx.user(fmt.Sprint("u", i)), "")
	}
	fx.drain(id)
	f.Fuzz(func(t *testing.T, query string) {
		fx.t = t
		req := httptest.NewRequest("GET", "/api/activities/"+id+"/leaderboard", nil)
		req.URL.RawQuery = query
		rec := httptest.NewRecorder()
		fx.h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK:
			var b struct {
				Entries []struct{ Rank int64 } `json:"entries"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || len(b.Entries) > 100 {
				t.Fatalf("query %q: %s", query, rec.Body)
			}
			for i, e := range b.Entries {
				if e.Rank != int64(i+1) {
					t.Fatalf("query %q: entry %d has rank %d", query, i, e.Rank)
				}
			}
		case http.StatusBadRequest:
			if !strings.Contains(rec.Body.String(), `"code":"INVALID_ARGUMENT"`) {
				t.Fatalf("query %q: 400 without its code: %s", query, rec.Body)
			}
		default:
			t.Fatalf("query %q: status %d %s", query, rec.Code, rec.Body)
		}
	})
}

// FuzzEditActivity sends arbitrary bodies to the edit route of an activity that has not started
// (an edit may start it, or end it): the answer is always a JSON 200, 400, 409 or 413, and only
// a 200 makes a new revision.
func FuzzEditActivity(f *testing.F) {
	for _, s := range []string{`{"name":"x"}`, `{}`, `null`, `{"stock":0}`, `{"stock":3,"price_cents":5}`, `{"start_at":"later"}`,
		`{"end_at":"2001-11-30T12:00:00Z"}`, `{"rate_limits":{"global":-1}}`, `{"pay_window_s":1e9}`, `{"kind":"redpacket"}`, "\xff"} {
		f.Add(s)
	}
	fx := newFixture(f, false)
	id := fx.create(strings.NewReplacer("11:00:00Z", "13:00:00Z", "13:00:00Z", "14:00:00Z").Replace(validItem))
	f.Fuzz(func(t *testing.T, body string) {
		fx.t = t
		before, _ := fx.svc.Known(id)
		r := fx.do("PATCH", "/api/admin/activities/"+id, adminToken, body)
		after, _ := fx.svc.Known(id)
		switch r.status {
		case http.StatusOK:
			if after.Revision != before.Revision+1 {
				t.Fatalf("200 but revision %d became %d", before.Revision, after.Revision)
			}
		case http.StatusBadRequest, http.StatusConflict, http.StatusRequestEntityTooLarge:
			if r.code() == "" || after.Revision != before.Revision {
				t.Fatalf("refused body %q: %s, revision %d -> %d", body, r.raw, before.Revision, after.Revision)
			}
		default:
			t.Fatalf("body %q: status %d %s", body, r.status, r.raw)
		}
	})
}
