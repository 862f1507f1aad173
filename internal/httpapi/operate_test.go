package httpapi_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"seckill/internal/httpapi"
	"seckill/internal/sale"
	"seckill/internal/saletest"
)

// TestAddStockAndEndEarly: an operator adds units to a sold-out item (on sale at once, the
// sold-out flag cleared), then ends the sale early (grabs refused ENDED, the orders placed
// still payable); bad requests and viewers change nothing.
func TestAddStockAndEndEarly(t *testing.T) {
	f := newFixtureWith(t, func(c *httpapi.Config, _ *saletest.Clock) {
		c.Admins = []httpapi.Admin{{Name: "grafana", Role: httpapi.RoleViewer, Token: viewerToken}}
	})
	id := f.create(validItem) // two units
	alice := f.grabOrder(id, "alice")
	f.grabOrder(id, "bob")
	if r := f.do("POST", "/api/activities/"+id+"/grab", f.user("carol"), ""); r.status != http.StatusGone {
		t.Fatalf("carol before more stock: %d %s, want 410", r.status, r.raw)
	}
	path := "/api/admin/activities/" + id + "/stock"
	for _, bad := range []struct {
		name, token, body string
		status            int
	}{
		{"none added", adminToken, `{"add":0}`, 400},
		{"fewer", adminToken, `{"add":-1}`, 400},
		{"words", adminToken, `{"add":"three"}`, 400},
		{"an unknown field", adminToken, `{"add":3,"price_cents":1}`, 400},
		{"no body", adminToken, ``, 400},
		{"too many", adminToken, `{"add":100000000}`, 400},
		{"a viewer", viewerToken, `{"add":3}`, 403},
	} {
		if r := f.do("POST", path, bad.token, bad.body); r.status != bad.status {
			t.Errorf("%s: %d %s, want %d", bad.name, r.status, r.raw, bad.status)
		}
	}
	if r := f.do("POST", "/api/admin/activities/nope/stock", adminToken, `{"add":3}`); r.status != 404 {
		t.Errorf("an unknown activity: %d %s", r.status, r.raw)
	}
	rp := f.create(`{"name":"RP","kind":"redpacket","count":3,"total_cents":300,"start_at":"2001-11-30T11:00:00Z","end_at":"2001-11-30T13:00:00Z"}`)
	if r := f.do("POST", "/api/admin/activities/"+rp+"/stock", adminToken, `{"add":3}`); r.status != 400 {
		t.Errorf("shares added to a red packet: %d %s, want 400", r.status, r.raw)
	}

	r := f.do("POST", path, adminToken, `{"add":3}`)
	if r.status != 200 || r.body["stock"] != 5.0 || r.body["remaining"] != 3.0 || r.body["revision"] != 2.0 || r.body["status"] != "active" {
		t.Fatalf("3 added: %d %s; want stock 5, 3 remaining, revision 2", r.status, r.raw)
	}
	f.grabOrder(id, "carol") // the sold-out flag is gone
	if st := f.do("GET", "/api/admin/activities/"+id+"/stats", adminToken, ""); st.body["stock"] != 5.0 || st.body["remaining"] != 2.0 {
		t.Errorf("stats after the addition: %s", st.raw)
	}

	r = f.do("POST", "/api/admin/activities/"+id+"/end", adminToken, "")
	if r.status != 200 || r.body["status"] != "ended" || r.body["revision"] != 3.0 {
		t.Fatalf("end: %d %s", r.status, r.raw)
	}
	if r := f.do("POST", "/api/activities/"+id+"/grab", f.user("dave"), ""); r.status != 403 || r.code() != "ENDED" {
		t.Fatalf("a grab after the end: %d %s, want 403 ENDED", r.status, r.raw)
	}
	if r := f.do("POST", "/api/admin/activities/"+id+"/end", adminToken, ""); r.status != 409 || r.code() != "INVALID_STATE" {
		t.Errorf("ended twice: %d %s, want 409", r.status, r.raw)
	}
	if r := f.do("POST", path, adminToken, `{"add":1}`); r.status != 409 || r.code() != "INVALID_STATE" {
		t.Errorf("stock added after the end: %d %s, want 409", r.status, r.raw)
	}
	if r := f.do("POST", "/api/admin/activities/"+id+"/end", viewerToken, ""); r.status != 403 {
		t.Errorf("a viewer ends it: %d %s", r.status, r.raw)
	}
	if r := f.do("POST", "/api/orders/"+alice+"/pay", f.user("alice"), ""); r.status != 200 || r.body["status"] != "PAID" {
		t.Errorf("alice pays after the end, inside her window: %d %s", r.status, r.raw)
	}
	audit := f.do("GET", "/api/admin/audit", adminToken, "")
	if strings.Count(audit.raw, `"target":"`+id+`"`) < 2 {
		t.Errorf("the audit log lacks the addition and the end of %s: %s", id, audit.raw)
	}
}

// TestAChangeTheGateHasNotTakenIsAccepted: the gate refuses an operator's change (it is away).
// The change is made, and said to be pending: 202, the activity at its new revision, its
// remaining units the gate's old count; once the gate is given it (the sweeper), it is in force
// and the next change is answered 200.
func TestAChangeTheGateHasNotTakenIsAccepted(t *testing.T) {
	var env saletest.Env
	f := newFixtureEnv(t, "", func(_ *httpapi.Config, e saletest.Env) { env = e })
	id := f.create(validItem) // two units
	env.Faults.FailRevisions(1)
	r := f.do("POST", "/api/admin/activities/"+id+"/stock", adminToken, `{"add":3}`)
	if r.status != http.StatusAccepted || r.body["stock"] != 5.0 || r.body["revision"] != 2.0 || r.body["remaining"] != 2.0 {
		t.Fatalf("3 added with the gate away: %d %s; want 202, stock 5 at revision 2, the gate's 2 remaining", r.status, r.raw)
	}
	if n, err := env.Service.ReviseOwed(context.Background(), 10); n != 1 || err != nil {
		t.Fatalf("ReviseOwed = %d, %v; want the addition given", n, err)
	}
	if rem, err := env.Service.Remaining(context.Background(), id); rem != 5 || err != nil {
		t.Fatalf("the gate once given it: %d, %v; want 5", rem, err)
	}
	env.Faults.FailRevisions(1)
	if r := f.do("POST", "/api/admin/activities/"+id+"/end", adminToken, ""); r.status != http.StatusAccepted || r.body["revision"] != 3.0 {
		t.Fatalf("ended with the gate away: %d %s; want 202 at revision 3", r.status, r.raw)
	}
	if r := f.do("PATCH", "/api/admin/activities/"+id, adminToken, `{"name":"renamed"}`); r.status != http.StatusConflict {
		t.Fatalf("renamed after the end: %d %s; want 409 (the end is made, pending or not)", r.status, r.raw)
	}
}

// TestOperatorReads: the operator's list of activities (ended ones too), a user's orders, an
// activity's orders as CSV, and the dead letters, listed and replayed.
func TestOperatorReads(t *testing.T) {
	ctx := context.Background()
	f := newFixtureWith(t, func(c *httpapi.Config, _ *saletest.Clock) {
		c.Admins = []httpapi.Admin{{Name: "grafana", Role: httpapi.RoleViewer, Token: viewerToken}}
	})
	id := f.create(strings.Replace(validItem, `"stock":2`, `"stock":5`, 1))
	old := f.create(strings.NewReplacer("11:00:00Z", "08:00:00Z", "13:00:00Z", "09:00:00Z").Replace(validItem))
	list := f.do("GET", "/api/admin/activities", viewerToken, "")
	if acts, _ := list.body["activities"].([]any); list.status != 200 || len(acts) != 2 ||
		acts[0].(map[string]any)["id"] != id || acts[1].(map[string]any)["status"] != "ended" {
		t.Fatalf("every activity: %d %s; want %s, then the ended %s", list.status, list.raw, id, old)
	}
	if r := f.do("GET", "/api/admin/activities?since=2001-11-30T10:00:00Z", viewerToken, ""); len(r.body["activities"].([]any)) != 1 {
		t.Errorf("those ending after 10:00: %s", r.raw)
	}
	for _, q := range []string{"?since=yesterday", "?limit=0", "?limit=501", "?limit=x"} {
		if r := f.do("GET", "/api/admin/activities"+q, viewerToken, ""); r.status != 400 {
			t.Errorf("activities%s: %d %s, want 400", q, r.status, r.raw)
		}
	}

	alice := f.grabOrder(id, "alice")
	f.grabOrder(id, "=HYPERLINK(evil)") // a user id a spreadsheet would run
	f.grabOrder(id, "bob")
	r := f.do("GET", "/api/admin/orders?user=alice", viewerToken, "")
	if os, _ := r.body["orders"].([]any); r.status != 200 || len(os) != 1 || os[0].(map[string]any)["order_token"] != alice ||
		os[0].(map[string]any)["user"] != "alice" {
		t.Fatalf("alice's orders: %d %s", r.status, r.raw)
	}
	page := f.do("GET", "/api/admin/orders?activity="+id+"&limit=2", viewerToken, "")
	next := fmt.Sprint(page.body["next"])
	if len(page.body["orders"].([]any)) != 2 || page.body["next"] == nil {
		t.Fatalf("a page of 2: %s", page.raw)
	}
	if r := f.do("GET", "/api/admin/orders?activity="+id+"&before="+next, viewerToken, ""); len(r.body["orders"].([]any)) != 1 ||
		r.body["orders"].([]any)[0].(map[string]any)["order_token"] != alice {
		t.Errorf("the page before %s: %s; want alice's, the oldest", next, r.raw)
	}
	for _, q := range []string{"", "?activity=a%20b", "?user=alice&limit=0", "?user=alice&before=x"} {
		if r := f.do("GET", "/api/admin/orders"+q, viewerToken, ""); r.status != 400 {
			t.Errorf("orders%s: %d %s, want 400", q, r.status, r.raw)
		}
	}

	req := httptest.NewRequest("GET", "/api/admin/activities/"+id+"/orders.csv", nil)
	req.Header.Set("Authorization", "Bearer "+viewerToken)
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	rows, err := csv.NewReader(rec.Body).ReadAll()
	if err != nil || rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/csv") || len(rows) != 4 {
		t.Fatalf("the CSV: %d %q, %v rows, %v", rec.Code, rec.Header().Get("Content-Type"), len(rows), err)
	}
	if strings.Join(rows[0], ",") != "order_id,order_token,user,status,amount_cents,reason,created_at,expires_at,closed_at" ||
		rows[1][1] != alice || rows[1][2] != "alice" || rows[1][3] != "CREATED" || rows[1][4] != "99900" || rows[2][2] != "'=HYPERLINK(evil)" {
		t.Errorf("the CSV rows: %q", rows)
	}
	if r := f.do("GET", "/api/admin/activities/nope/orders.csv", viewerToken, ""); r.status != 404 {
		t.Errorf("the CSV of no activity: %d %s", r.status, r.raw)
	}

	// A grab the workers gave up on (the database was refusing it), replayed once fixed.
	g := sale.Grab{Token: sale.NewGrabToken(f.clock.Now()), ActivityID: id, UserID: "carol", AmountCents: 99900, At: f.clock.Now()}
	if err := f.store.DeadLetter(ctx, g, 5, "the database refused it", f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	dl := f.do("GET", "/api/admin/dead-letters?activity="+id, viewerToken, "")
	if ds, _ := dl.body["dead_letters"].([]any); dl.status != 200 || len(ds) != 1 || ds[0].(map[string]any)["token"] != g.Token ||
		ds[0].(map[string]any)["grabbed_at"] == nil || ds[0].(map[string]any)["attempts"] != 5.0 {
		t.Fatalf("dead letters: %d %s", dl.status, dl.raw)
	}
	body := `{"token":"` + g.Token + `"}`
	if r := f.do("POST", "/api/admin/dead-letters/replay", viewerToken, body); r.status != 403 {
		t.Errorf("a viewer replays: %d %s", r.status, r.raw)
	}
	r = f.do("POST", "/api/admin/dead-letters/replay", adminToken, body)
	if o, _ := r.body["order"].(map[string]any); r.status != 200 || r.body["new"] != true || o["status"] != "CREATED" || o["user"] != "carol" {
		t.Fatalf("the replay: %d %s; want carol's order created", r.status, r.raw)
	}
	if r := f.do("POST", "/api/admin/dead-letters/replay", adminToken, body); r.status != 404 {
		t.Errorf("replayed twice: %d %s, want 404", r.status, r.raw)
	}
	if r := f.do("GET", "/api/orders/"+g.Token, f.user("carol"), ""); r.body["status"] != "CREATED" {
		t.Errorf("carol's order: %s", r.raw)
	}
	if r := f.do("GET", "/api/admin/dead-letters?limit=0", viewerToken, ""); r.status != 400 {
		t.Errorf("a bad limit: %d", r.status)
	}
}

// TestEditActivity: before its start anything an activity is sold on may change, and the sale
// then runs on the new terms; once started only its name, end and rate limits; bad edits
// change nothing.
func TestEditActivity(t *testing.T) {
	f := newFixture(t, false)
	later := strings.NewReplacer("11:00:00Z", "13:00:00Z", "13:00:00Z", "14:00:00Z").Replace(validItem) // 13:00 to 14:00; the clock is at 12:00
	id := f.create(later)
	path := "/api/admin/activities/" + id
	for _, bad := range []struct{ name, body string }{
		{"nothing", `{}`},
		{"no stock", `{"stock":0}`},
		{"a kind", `{"kind":"redpacket"}`},
		{"a time that is not one", `{"start_at":"soon"}`},
		{"an end before the start", `{"end_at":"2001-11-30T12:30:00Z"}`},
		{"a pay window of none", `{"pay_window_s":0}`},
		{"a rate below zero", `{"rate_limits":{"per_user":-1}}`},
	} {
		if r := f.do("PATCH", path, adminToken, bad.body); r.status != 400 || r.code() != "INVALID_ARGUMENT" {
			t.Errorf("%s: %d %s, want 400", bad.name, r.status, r.raw)
		}
	}
	if r := f.do("PATCH", "/api/admin/activities/nope", adminToken, `{"name":"x"}`); r.status != 404 {
		t.Errorf("an unknown activity: %d %s", r.status, r.raw)
	}
	r := f.do("PATCH", path, adminToken, `{"name":"Phone Y","price_cents":50000,"stock":4,"per_user_limit":2,
		"start_at":"2001-11-30T12:30:00Z","pay_window_s":60,"rate_limits":{"per_user":3}}`)
	if r.status != 200 || r.body["name"] != "Phone Y" || r.body["price_cents"] != 50000.0 || r.body["stock"] != 4.0 ||
		r.body["remaining"] != 4.0 || r.body["per_user_limit"] != 2.0 || r.body["revision"] != 2.0 || r.body["pay_window_s"] != 60.0 {
		t.Fatalf("the edit before the start: %d %s", r.status, r.raw)
	}
	if a, _ := f.svc.Known(id); a.Rates.PerUser != 3 || !a.StartAt.Equal(saletest.T0.Add(30*time.Minute)) {
		t.Errorf("the activity after the edit: %+v", a)
	}

	f.clock.Advance(45 * time.Minute) // 12:45: the sale is on
	tok := f.grabOrder(id, "alice")
	if o := f.do("GET", "/api/orders/"+tok, f.user("alice"), ""); o.body["amount_cents"] != 50000.0 {
		t.Errorf("a grab at the new price: %s", o.raw)
	}
	f.grabOrder(id, "alice") // the new limit is 2
	if r := f.do("POST", "/api/activities/"+id+"/grab", f.user("alice"), ""); r.status != 409 || r.code() != "ALREADY_BOUGHT" {
		t.Errorf("alice's third grab: %d %s", r.status, r.raw)
	}
	for _, body := range []string{`{"price_cents":1}`, `{"stock":10}`, `{"per_user_limit":5}`, `{"start_at":"2001-11-30T13:00:00Z"}`,
		`{"pay_window_s":30}`, `{"require_challenge":true}`} {
		if r := f.do("PATCH", path, adminToken, body); r.status != 409 || r.code() != "INVALID_STATE" {
			t.Errorf("%s after the start: %d %s, want 409", body, r.status, r.raw)
		}
	}
	if r := f.do("PATCH", path, adminToken, `{"end_at":"2001-11-30T12:40:00Z"}`); r.status != 400 {
		t.Errorf("an end already past: %d %s, want 400", r.status, r.raw)
	}
	r = f.do("PATCH", path, adminToken, `{"name":"Phone Y, last units","end_at":"2001-11-30T15:00:00Z","rate_limits":{"per_user":0}}`)
	if r.status != 200 || r.body["name"] != "Phone Y, last units" || r.body["end_at"] != "2001-11-30T15:00:00Z" || r.body["revision"] != 3.0 {
		t.Fatalf("the edit after the start: %d %s", r.status, r.raw)
	}
	if a, _ := f.svc.Known(id); a.Rates.PerUser != sale.RateOff {
		t.Errorf("the per-user limit switched off: %+v", a.Rates)
	}

	// A stock cut before the start: the gate sells the new stock, no more.
	small := f.create(later)
	if r := f.do("PATCH", "/api/admin/activities/"+small, adminToken, `{"stock":1,"start_at":"2001-11-30T12:50:00Z"}`); r.status != 200 || r.body["remaining"] != 1.0 {
		t.Fatalf("the stock cut: %d %s", r.status, r.raw)
	}
	f.clock.Advance(10 * time.Minute)
	f.grabOrder(small, "bob")
	if r := f.do("POST", "/api/activities/"+small+"/grab", f.user("carol"), ""); r.status != 410 {
		t.Errorf("a grab past the cut stock: %d %s, want 410", r.status, r.raw)
	}
}
