package httpapi_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image/png"
	"net/http"
	"strings"
	"testing"

	"seckill/internal/httpapi"
	"seckill/internal/saletest"
)

const guardedItem = `{"name":"Console","kind":"item","stock":3,"price_cents":49900,"require_challenge":true,"start_at":"2001-11-30T11:00:00Z","end_at":"2001-11-30T13:00:00Z"}`

// solve asks for a challenge as bearer and answers it (right, or off by wrong), returning the
// answer's response.
func (f *fixture) solve(id, bearer string, wrong int64) response {
	f.t.Helper()
	c := f.do("POST", "/api/activities/"+id+"/challenge", bearer, "")
	if c.status != http.StatusCreated {
		f.t.Fatalf("challenge: %d %s", c.status, c.raw)
	}
	cid := c.body["challenge_id"].(string)
	img := c.body["image"].(string)
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(img, "data:image/png;base64,"))
	if err != nil || !strings.HasPrefix(img, "data:image/png;base64,") {
		f.t.Fatalf("image is not a PNG data URL: %.40q", img)
	}
	if _, err := png.Decode(bytes.NewReader(raw)); err != nil {
		f.t.Fatalf("image does not decode: %v", err)
	}
	if strings.Contains(c.raw, fmt.Sprint(f.answers.Of(f.t, cid))) && strings.Contains(c.raw, "question") {
		f.t.Fatalf("the answer leaks in the response: %s", c.raw)
	}
	return f.do("POST", "/api/activities/"+id+"/challenge/answer", bearer,
		fmt.Sprintf(`{"challenge_id":%q,"answer":%d}`, cid, f.answers.Of(f.t, cid)+wrong))
}

// TestChallengeOverHTTP walks the hidden grab path: a bare grab is refused, a solved challenge
// reveals a path that grabs once, and every refusal is counted.
func TestChallengeOverHTTP(t *testing.T) {
	seen := &outcomes{}
	f := newFixtureWith(t, func(c *httpapi.Config, _ *saletest.Clock) { c.Observe = seen })
	id := f.create(guardedItem)
	alice, mallory := f.user("alice"), f.user("mallory")

	if r := f.do("GET", "/api/activities/"+id, "", ""); r.body["require_challenge"] != true {
		t.Fatalf("the activity does not say it requires a challenge: %s", r.raw)
	}
	if r := f.do("POST", "/api/activities/"+id+"/grab", alice, ""); r.status != http.StatusForbidden || r.code() != "CHALLENGE_REQUIRED" {
		t.Fatalf("bare grab: %d %s", r.status, r.raw)
	}
	if r := f.solve(id, alice, 1); r.status != http.StatusForbidden || r.code() != "CHALLENGE_FAILED" {
		t.Fatalf("wrong answer: %d %s", r.status, r.raw)
	}
	r := f.solve(id, alice, 0)
	if r.status != http.StatusOK {
		t.Fatalf("right answer: %d %s", r.status, r.raw)
	}
	path := r.body["grab_path"].(string)
	if want := "/api/activities/" + id + "/grab/" + r.body["path_token"].(string); path != want {
		t.Fatalf("grab_path %q, want %q", path, want)
	}
	if r := f.do("POST", path, mallory, ""); r.status != http.StatusForbidden || r.code() != "CHALLENGE_REQUIRED" {
		t.Fatalf("alice's path used by mallory: %d %s", r.status, r.raw)
	}
	if r := f.do("POST", path, alice, ""); r.status != http.StatusAccepted {
		t.Fatalf("alice's path: %d %s", r.status, r.raw)
	}
	if r := f.do("POST", path, alice, ""); r.status != http.StatusForbidden || r.code() != "CHALLENGE_REQUIRED" {
		t.Fatalf("alice's path replayed: %d %s", r.status, r.raw)
	}
	bad := []struct{ body, code string }{
		{`{}`, "INVALID_ARGUMENT"},
		{`{"challenge_id":"c1"}`, "INVALID_ARGUMENT"},
		{`{"challenge_id":"c1","answer":"7"}`, "INVALID_ARGUMENT"},
		{`{"challenge_id":"c1","answer":7,"extra":1}`, "INVALID_ARGUMENT"},
		{`{"challenge_id":"' OR 1=1 --","answer":7}`, "CHALLENGE_FAILED"},
		{`{"challenge_id":"` + strings.Repeat("c", 500) + `","answer":7}`, "CHALLENGE_FAILED"},
	}
	for _, b := range bad {
		if r := f.do("POST", "/api/activities/"+id+"/challenge/answer", alice, b.body); r.code() != b.code {
			t.Errorf("answer %s: %d %s, want %s", b.body, r.status, r.raw, b.code)
		}
	}
	if r := f.do("POST", "/api/activities/"+id+"/challenge", "", ""); r.status != http.StatusUnauthorized {
		t.Fatalf("challenge without a token: %d %s", r.status, r.raw)
	}
	if r := f.do("POST", "/api/activities/nope/challenge", alice, ""); r.status != http.StatusNotFound {
		t.Fatalf("challenge for no activity: %d %s", r.status, r.raw)
	}
	want := "challenge_required challenge:issued challenge:challenge_failed challenge:issued challenge:solved " +
		"challenge_required won challenge_required"
	if got := strings.Join(seen.seen, " "); !strings.HasPrefix(got, want) {
		t.Fatalf("observed %q, want it to start with %q", got, want)
	}
	if r := f.do("GET", "/api/admin/activities/"+id+"/stats", adminToken, ""); r.body["grabbed"] != 1.0 {
		t.Fatalf("stats %s, want 1 grabbed: only alice's path took a unit", r.raw)
	}
}
