package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"
)

const redPacket = `{"name":"Rain","kind":"redpacket","count":5,"total_cents":500,"start_at":"2001-11-30T11:00:00Z","end_at":"2001-11-30T13:00:00Z"}`

// TestLeaderboardOverHTTP: five users share a red packet; the leaderboard lists them largest
// first, each one's rank matches it, and bad requests are refused.
func TestLeaderboardOverHTTP(t *testing.T) {
	f := newFixture(t, false)
	id := f.create(redPacket)
	amounts := map[string]float64{}
	for i := range 5 {
		user := fmt.Sprint("u", i)
		r := f.do("POST", "/api/activities/"+id+"/grab", f.user(user), "")
		if r.status != http.StatusAccepted {
			t.Fatalf("grab: %d %s", r.status, r.raw)
		}
		amounts[user] = r.body["amount_cents"].(float64)
	}
	f.drain(id)
	r := f.do("GET", "/api/activities/"+id+"/leaderboard?limit=100", "", "")
	if r.status != http.StatusOK || r.body["exact"] != true || r.body["strategy"] != "exact" {
		t.Fatalf("leaderboard: %d %s", r.status, r.raw)
	}
	entries := r.body["entries"].([]any)
	if len(entries) != 5 {
		t.Fatalf("%d entries, want 5: %s", len(entries), r.raw)
	}
	sum, prev := 0.0, 1e18
	for i, e := range entries {
		e := e.(map[string]any)
		user, amount := e["user"].(string), e["amount_cents"].(float64)
		if e["rank"] != float64(i+1) || amount != amounts[user] || amount > prev {
			t.Fatalf("entry %d: %v (amounts %v)", i, e, amounts)
		}
		prev, sum = amount, sum+amount
		me := f.do("GET", "/api/activities/"+id+"/rank", f.user(user), "")
		if mine := me.body["entries"].([]any)[0].(map[string]any); mine["rank"] != float64(i+1) {
			t.Fatalf("%s's rank: %s, want %d", user, me.raw, i+1)
		}
	}
	if sum != 500 {
		t.Fatalf("the shares sum to %v, want 500", sum)
	}
	if st := f.do("GET", "/api/admin/activities/"+id+"/stats", adminToken, ""); st.body["leaderboard"].(map[string]any)["strategy"] != "exact" {
		t.Fatalf("stats: %s", st.raw)
	}
	item := f.create(validItem)
	for _, tc := range []struct {
		path, bearer string
		status       int
	}{
		{"/api/activities/" + id + "/leaderboard?limit=0", "", 400},
		{"/api/activities/" + id + "/leaderboard?limit=101", "", 400},
		{"/api/activities/" + id + "/leaderboard?limit=ten", "", 400},
		{"/api/activities/" + item + "/leaderboard", "", 404},
		{"/api/activities/nope/leaderboard", "", 404},
		{"/api/activities/" + id + "/rank", "", 401},
		{"/api/activities/" + id + "/rank", f.user("stranger"), 404},
	} {
		if r := f.do("GET", tc.path, tc.bearer, ""); r.status != tc.status || r.code() == "" {
			t.Errorf("GET %s: %d %s, want %d with a code", tc.path, r.status, r.raw, tc.status)
		}
	}
}
