package httpapi_test

import (
	"testing"

	"seckill/internal/httpapi"
	"seckill/internal/saletest"
)

// TestFeatures: GET /api/admin/features says which features the node serves, and each one it
// says it lacks has no route (404), while each one it has answers: a page that asks first never
// calls a route that is not there.
func TestFeatures(t *testing.T) {
	probe := map[string]string{ // a viewer's read of each feature that has one
		"payments": "/api/admin/payments?state=refund_pending",
		"outbox":   "/api/admin/deliveries?state=parked",
		"operator": "/api/admin/dead-letters",
		"blocks":   "/api/admin/blocks",
		"audit":    "/api/admin/audit",
	}
	for _, tc := range []struct {
		name string
		f    *fixture
		want map[string]bool
	}{
		{"a provider and a receiver", newProviderFixture(t),
			map[string]bool{"operator": true, "payments": true, "outbox": true, "lines": true, "boards": true,
				"challenges": true, "blocks": true, "audit": true, "reservations": true, "forecasts": true}},
		{"neither", newFixtureWith(t, func(c *httpapi.Config, _ *saletest.Clock) {
			c.Outbox = nil
			c.Admins = []httpapi.Admin{{Name: "grafana", Role: httpapi.RoleViewer, Token: viewerToken}}
		}), map[string]bool{"operator": true, "payments": false, "outbox": false, "lines": true, "boards": true,
			"challenges": true, "blocks": true, "audit": true, "reservations": true, "forecasts": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.f
			if r := f.do("GET", "/api/admin/features", "", ""); r.status != 401 {
				t.Fatalf("without a token: %d %s; want 401", r.status, r.raw)
			}
			r := f.do("GET", "/api/admin/features", viewerToken, "")
			providers, _ := r.body["payment_providers"].([]any)
			if tc.want["payments"] != (len(providers) == 1 && providers[0] == "signed") {
				t.Errorf("payment_providers %v; want [signed] with payments, none without", r.body["payment_providers"])
			}
			delete(r.body, "payment_providers")
			if r.status != 200 || len(r.body) != len(tc.want) {
				t.Fatalf("features: %d %s; want 200 and %d features", r.status, r.raw, len(tc.want))
			}
			for name, want := range tc.want {
				if got, ok := r.body[name].(bool); !ok || got != want {
					t.Errorf("%s: %v; want %v (%s)", name, r.body[name], want, r.raw)
				}
				path, ok := probe[name]
				if !ok {
					continue
				}
				switch p := f.do("GET", path, viewerToken, ""); {
				case want && p.status != 200:
					t.Errorf("%s is served, but GET %s answered %d %s", name, path, p.status, p.raw)
				case !want && (p.status != 404 || p.code() != "NOT_FOUND"):
					t.Errorf("%s is not served, but GET %s answered %d %s; want 404 NOT_FOUND", name, path, p.status, p.raw)
				}
			}
		})
	}
}
