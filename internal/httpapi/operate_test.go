package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"seckill/internal/httpapi"
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
