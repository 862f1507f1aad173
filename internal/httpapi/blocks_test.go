package httpapi_test

import (
	"net/http"
	"testing"
	"time"
)

// TestBlacklist: blocked users and networks get 403 BLOCKED and take nothing; entries are
// listed, expire, and can be removed; bad entries are refused and write nothing.
func TestBlacklist(t *testing.T) {
	f := newFixture(t, false)
	id := f.create(bigItem)
	grab := func(peer, user string) response {
		return f.doFrom(peer, "POST", "/api/activities/"+id+"/grab", f.user(user), "")
	}
	block := func(body string) response { return f.do("POST", "/api/admin/blocks", adminToken, body) }

	if r := block(`{"kind":"user","value":"bot","reason":"scalping"}`); r.status != http.StatusCreated || r.body["value"] != "bot" {
		t.Fatalf("block a user: %d %s", r.status, r.raw)
	}
	if r := block(`{"kind":"ip","value":"203.0.113.77/24","reason":"farm","until":"2001-11-30T12:01:00Z"}`); r.status != http.StatusCreated ||
		r.body["value"] != "203.0.113.0/24" {
		t.Fatalf("block a network: %d %s, want it stored in canonical form", r.status, r.raw)
	}
	if r := grab("198.51.100.1:1", "bot"); r.status != http.StatusForbidden || r.code() != "BLOCKED" {
		t.Fatalf("a blocked user's grab: %d %s", r.status, r.raw)
	}
	if r := grab("203.0.113.9:1", "honest"); r.status != http.StatusForbidden || r.code() != "BLOCKED" {
		t.Fatalf("a grab from a blocked network: %d %s", r.status, r.raw)
	}
	if r := grab("198.51.100.1:1", "honest"); r.status != http.StatusAccepted {
		t.Fatalf("an honest grab from elsewhere: %d %s", r.status, r.raw)
	}
	if left := f.remaining(id); left != 999 {
		t.Fatalf("%v units left, want 999: a blocked grab takes nothing", left)
	}
	list := f.do("GET", "/api/admin/blocks", adminToken, "")
	if bs, _ := list.body["blocks"].([]any); list.status != http.StatusOK || len(bs) != 2 {
		t.Fatalf("list: %d %s", list.status, list.raw)
	}

	before := list.raw
	for _, tc := range []struct{ body, want string }{
		{`{"kind":"email","value":"a@b"}`, "INVALID_ARGUMENT"},
		{`{"kind":"user","value":"has space"}`, "INVALID_ARGUMENT"},
		{`{"kind":"ip","value":"not-an-ip"}`, "INVALID_ARGUMENT"},
		{`{"kind":"ip","value":"198.51.100.1","until":"2001-11-30T11:00:00Z"}`, "INVALID_ARGUMENT"},
		{`{"kind":"ip","value":"198.51.100.1","until":"tomorrow"}`, "INVALID_ARGUMENT"},
		{`{"kind":"user","value":"x","color":"red"}`, "INVALID_ARGUMENT"},
		{`{"kind":"user","value":"x","reason":"'; DROP TABLE blocks; --"}`, ""},
	} {
		r := block(tc.body)
		if tc.want == "" { // SQL in a string is only a string
			if r.status != http.StatusCreated {
				t.Fatalf("block %s: %d %s", tc.body, r.status, r.raw)
			}
			f.do("DELETE", "/api/admin/blocks/user/x", adminToken, "")
			continue
		}
		if r.status != http.StatusBadRequest || r.code() != tc.want {
			t.Errorf("block %s: %d %s, want 400 %s", tc.body, r.status, r.raw, tc.want)
		}
	}
	if r := f.do("POST", "/api/admin/blocks", "", `{"kind":"user","value":"y"}`); r.status != http.StatusUnauthorized {
		t.Fatalf("without the admin token: %d", r.status)
	}
	if after := f.do("GET", "/api/admin/blocks", adminToken, "").raw; after != before {
		t.Fatalf("refused entries changed the list:\n%s\n%s", before, after)
	}

	f.clock.Advance(2 * time.Minute) // the network's entry has ended
	if r := grab("203.0.113.9:1", "other"); r.status != http.StatusAccepted {
		t.Fatalf("after the network's entry ended: %d %s", r.status, r.raw)
	}
	if r := f.do("DELETE", "/api/admin/blocks/user/bot", adminToken, ""); r.status != http.StatusNoContent {
		t.Fatalf("unblock: %d %s", r.status, r.raw)
	}
	if r := grab("198.51.100.1:1", "bot"); r.status != http.StatusAccepted {
		t.Fatalf("after the unblock: %d %s", r.status, r.raw)
	}
	if r := f.do("DELETE", "/api/admin/blocks/user/bot", adminToken, ""); r.status != http.StatusNotFound {
		t.Fatalf("unblock twice: %d %s", r.status, r.raw)
	}
	if r := f.do("DELETE", "/api/admin/blocks/ip/203.0.113.0/24", adminToken, ""); r.status != http.StatusNoContent {
		t.Fatalf("remove the network by its CIDR: %d %s", r.status, r.raw)
	}
}
