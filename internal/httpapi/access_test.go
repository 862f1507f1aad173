package httpapi_test

import (
	"net/http"
	"strconv"
	"testing"

	"seckill/internal/httpapi"
	"seckill/internal/saletest"
)

const (
	viewerToken   = "viewer-token-for-the-dashboard"
	operatorToken = "operator-token-of-carol-000"
)

// TestAdminRoles: a viewer token reads the admin API and changes nothing; an operator token
// changes; a wrong token is refused; and the audit log names who did what, from where, with
// what answer, the refusals of a viewer's changes included.
func TestAdminRoles(t *testing.T) {
	f := newFixtureWith(t, func(c *httpapi.Config, _ *saletest.Clock) {
		c.Admins = []httpapi.Admin{{Name: "grafana", Role: httpapi.RoleViewer, Token: viewerToken},
			{Name: "carol", Role: httpapi.RoleOperator, Token: operatorToken}}
	})
	id := f.create(validItem) // by the operator "admin" (SECKILL_ADMIN_TOKEN)
	if r := f.do("GET", "/api/admin/activities/"+id+"/stats", viewerToken, ""); r.status != http.StatusOK {
		t.Fatalf("viewer reads stats: %d %s", r.status, r.raw)
	}
	if r := f.do("GET", "/api/admin/blocks", viewerToken, ""); r.status != http.StatusOK {
		t.Fatalf("viewer reads the blacklist: %d %s", r.status, r.raw)
	}
	if r := f.doFrom("198.51.100.9:4000", "POST", "/api/admin/activities", viewerToken, validItem); r.status != http.StatusForbidden || r.code() != "FORBIDDEN" {
		t.Fatalf("viewer creates an activity: %d %s, want 403 FORBIDDEN", r.status, r.raw)
	}
	if r := f.do("POST", "/api/admin/blocks", viewerToken, `{"kind":"user","value":"bot-1","reason":"scalping"}`); r.status != http.StatusForbidden {
		t.Fatalf("viewer blocks a user: %d %s, want 403", r.status, r.raw)
	}
	if r := f.do("GET", "/api/admin/blocks", viewerToken, ""); len(r.body["blocks"].([]any)) != 0 {
		t.Fatalf("the viewer's refused block changed the blacklist: %s", r.raw)
	}
	if r := f.doFrom("198.51.100.7:4000", "POST", "/api/admin/blocks", operatorToken, `{"kind":"user","value":"bot-1","reason":"scalping"}`); r.status != http.StatusCreated {
		t.Fatalf("operator blocks a user: %d %s", r.status, r.raw)
	}
	if r := f.do("POST", "/api/admin/activities/"+id+"/reconcile", operatorToken, ""); r.status != http.StatusOK {
		t.Fatalf("operator reconciles: %d %s", r.status, r.raw)
	}
	for _, tok := range []string{"", "nope", viewerToken + "x", operatorToken[:10]} {
		if r := f.do("GET", "/api/admin/activities/"+id+"/stats", tok, ""); r.status != http.StatusUnauthorized {
			t.Fatalf("token %q: %d %s, want 401", tok, r.status, r.raw)
		}
	}

	r := f.do("GET", "/api/admin/audit?limit=10", viewerToken, "")
	if r.status != http.StatusOK {
		t.Fatalf("audit log: %d %s", r.status, r.raw)
	}
	type entry struct {
		actor, action, target, remote string
		status                        float64
	}
	var got []entry
	for _, e := range r.body["entries"].([]any) {
		m := e.(map[string]any)
		target, _ := m["target"].(string)
		got = append(got, entry{m["actor"].(string), m["action"].(string), target, m["remote"].(string), m["status"].(float64)})
	}
	want := []entry{ // newest first; reads are not audited, nor are unknown tokens
		{"carol", "POST /api/admin/activities/{id}/reconcile", id, "192.0.2.1", 200},
		{"carol", "POST /api/admin/blocks", "user:bot-1", "198.51.100.7", 201},
		{"grafana", "POST /api/admin/blocks", "", "192.0.2.1", 403},
		{"grafana", "POST /api/admin/activities", "", "198.51.100.9", 403},
		{"admin", "POST /api/admin/activities", id, "192.0.2.1", 201},
	}
	if len(got) != len(want) {
		t.Fatalf("audit log: %+v\nwant %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("audit entry %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if r := f.do("GET", "/api/admin/audit?limit=2", viewerToken, ""); len(r.body["entries"].([]any)) != 2 || r.body["next"] == nil {
		t.Fatalf("a page of two: %s", r.raw)
	} else if next := f.do("GET", "/api/admin/audit?limit=10&before="+formatID(r.body["next"]), viewerToken, ""); len(next.body["entries"].([]any)) != 3 {
		t.Fatalf("the page after it: %s", next.raw)
	}
	for _, q := range []string{"limit=0", "limit=501", "limit=ten", "before=-1", "before=x"} {
		if r := f.do("GET", "/api/admin/audit?"+q, viewerToken, ""); r.status != http.StatusBadRequest {
			t.Errorf("audit ?%s: %d %s, want 400", q, r.status, r.raw)
		}
	}
}

func formatID(v any) string {
	n, _ := v.(float64)
	return strconv.FormatInt(int64(n), 10)
}
