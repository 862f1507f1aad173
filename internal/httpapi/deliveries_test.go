package httpapi_test

import (
	"fmt"
	"net/url"
	"testing"

	"seckill/internal/httpapi"
	"seckill/internal/sale"
	"seckill/internal/saletest"
)

// TestDeliveries: an order's events are listed with their deliveries, pending until a relay
// takes them; a delivery is replayed by name; bad filters and unknown deliveries are refused.
func TestDeliveries(t *testing.T) {
	f := newFixture(t, false)
	id := f.create(validItem)
	r := f.do("POST", "/api/activities/"+id+"/grab", f.user("alice"), "")
	if r.status != 202 {
		t.Fatalf("grab: %d %s", r.status, r.raw)
	}
	token := r.body["order_token"].(string)
	f.waitStatus("alice", token, sale.StatusCreated)
	if r := f.do("POST", "/api/orders/"+token+"/pay", f.user("alice"), ""); r.status != 200 {
		t.Fatalf("pay: %d %s", r.status, r.raw)
	}

	list := f.do("GET", "/api/admin/deliveries?state=pending&sink="+url.QueryEscape(saletest.Sink), adminToken, "")
	if list.status != 200 {
		t.Fatalf("list: %d %s", list.status, list.raw)
	}
	ds := list.body["deliveries"].([]any)
	if len(ds) != 2 {
		t.Fatalf("deliveries %s: want the order's creation and payment", list.raw)
	}
	paid, created := ds[0].(map[string]any), ds[1].(map[string]any) // newest first
	if paid["type"] != "order.paid" || created["type"] != "order.created" || paid["event_id"] != token+".paid" ||
		paid["state"] != "pending" || paid["sink"] != saletest.Sink || paid["order"].(map[string]any)["status"] != "PAID" ||
		created["order"].(map[string]any)["user"] != "alice" || paid["seq"].(float64) <= created["seq"].(float64) {
		t.Fatalf("deliveries %s", list.raw)
	}
	page := f.do("GET", "/api/admin/deliveries?limit=1", adminToken, "")
	if n := len(page.body["deliveries"].([]any)); page.status != 200 || n != 1 || page.body["next"] != paid["seq"] {
		t.Fatalf("a page of one: %s", page.raw)
	}
	older := f.do("GET", fmt.Sprintf("/api/admin/deliveries?limit=5&before=%.0f", page.body["next"]), adminToken, "")
	if n := len(older.body["deliveries"].([]any)); older.status != 200 || n != 1 || older.body["next"] != nil {
		t.Fatalf("the page before: %s", older.raw)
	}
	if r := f.do("GET", "/api/admin/deliveries?state=parked", adminToken, ""); r.status != 200 || len(r.body["deliveries"].([]any)) != 0 {
		t.Fatalf("parked: %s", r.raw)
	}

	replay := f.do("POST", "/api/admin/deliveries/replay", adminToken, fmt.Sprintf(`{"sink":%q,"event_id":%q}`, saletest.Sink, token+".created"))
	if replay.status != 200 || replay.body["state"] != "pending" || replay.body["attempts"] != 0.0 || replay.body["event_id"] != token+".created" {
		t.Fatalf("replay: %d %s", replay.status, replay.raw)
	}
	for _, tc := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"GET", "/api/admin/deliveries?state=lost", "", 400, "INVALID_ARGUMENT"},
		{"GET", "/api/admin/deliveries?limit=0", "", 400, "INVALID_ARGUMENT"},
		{"GET", "/api/admin/deliveries?limit=x", "", 400, "INVALID_ARGUMENT"},
		{"GET", "/api/admin/deliveries?before=-3", "", 400, "INVALID_ARGUMENT"},
		{"POST", "/api/admin/deliveries/replay", `{"sink":"suite","event_id":"nope.created"}`, 404, "NOT_FOUND"},
		{"POST", "/api/admin/deliveries/replay", `{"sink":"suite"}`, 400, "INVALID_ARGUMENT"},
		{"POST", "/api/admin/deliveries/replay", `{"sink":"suite","event_id":"x","again":true}`, 400, "INVALID_ARGUMENT"},
	} {
		if r := f.do(tc.method, tc.path, adminToken, tc.body); r.status != tc.status || r.code() != tc.code {
			t.Errorf("%s %s %s: %d %s, want %d %s", tc.method, tc.path, tc.body, r.status, r.code(), tc.status, tc.code)
		}
	}
	if r := f.do("GET", "/api/admin/deliveries", f.user("alice"), ""); r.status != 401 {
		t.Errorf("a user's token: %d", r.status)
	}
	if r := f.do("POST", "/api/admin/deliveries/replay", "", `{"sink":"suite","event_id":"x"}`); r.status != 401 {
		t.Errorf("no token: %d", r.status)
	}
}

// TestDeliveriesRoles: a viewer reads the deliveries and cannot replay one.
func TestDeliveriesRoles(t *testing.T) {
	const viewer = "a-viewer-token-for-the-deliveries"
	f := newFixtureWith(t, func(c *httpapi.Config, _ *saletest.Clock) {
		c.Admins = []httpapi.Admin{{Name: "dashboards", Role: httpapi.RoleViewer, Token: viewer}}
	})
	if r := f.do("GET", "/api/admin/deliveries", viewer, ""); r.status != 200 {
		t.Fatalf("a viewer lists: %d %s", r.status, r.raw)
	}
	if r := f.do("POST", "/api/admin/deliveries/replay", viewer, `{"sink":"suite","event_id":"x.created"}`); r.status != 403 || r.code() != "FORBIDDEN" {
		t.Fatalf("a viewer replays: %d %s", r.status, r.raw)
	}
}
