package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"seckill/internal/dbtest"
	"seckill/internal/httpapi"
	"seckill/internal/saletest"
)

// injections are the classic SQL injection payloads, each fit for a field that takes printable
// text.
var injections = []string{
	`' OR '1'='1`,
	`'; DROP TABLE orders; --`,
	`" OR ""="`,
	`1; DELETE FROM activities`,
	`admin'--`,
	`') OR 1=1 --`,
	`' UNION SELECT token, user_id FROM orders --`,
	`\'; UPDATE orders SET status='PAID' --`,
	`%27%20OR%201%3D1`,
}

// TestSQLInjectionInEveryField sends the payloads in every string a client controls, on SQLite,
// MariaDB and PostgreSQL: each is stored verbatim where the field takes text, refused with a
// stable code where it does not, and never changes anything else.
func TestSQLInjectionInEveryField(t *testing.T) {
	for name, dsn := range map[string]func(t *testing.T) string{
		"SQLite":     func(*testing.T) string { return "" },
		"MariaDB":    func(t *testing.T) string { return dbtest.MySQLDSN(t) },
		"PostgreSQL": func(t *testing.T) string { return dbtest.PostgresDSN(t) },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixtureOn(t, dsn(t), func(c *httpapi.Config, _ *saletest.Clock) {})
			injectEverywhere(t, f)
		})
	}
}

func injectEverywhere(t *testing.T, f *fixture) {
	ctx := context.Background()
	id := f.create(bigItem)
	victim := f.user("victim")
	r := f.do("POST", "/api/activities/"+id+"/grab", victim, "")
	if r.status != http.StatusAccepted {
		t.Fatalf("the victim's grab: %d %s", r.status, r.raw)
	}
	victims := r.body["order_token"].(string)
	f.drain(id)

	for _, p := range injections {
		// A name is text: stored and shown as sent.
		body := strings.Replace(bigItem, `"name":"Phone"`, fmt.Sprintf(`"name":%q`, p), 1)
		made := f.create(body)
		if got := f.do("GET", "/api/activities/"+made, "", ""); got.body["name"] != p {
			t.Errorf("name %q came back as %v", p, got.body["name"])
		}
		// Ids and order references are not text: not found.
		for _, path := range []string{"/api/activities/" + url.PathEscape(p), "/api/orders/" + url.PathEscape(p)} {
			bearer := ""
			if strings.HasPrefix(path, "/api/orders/") {
				bearer = victim
			}
			if got := f.do("GET", path, bearer, ""); got.status != http.StatusNotFound {
				t.Errorf("GET %s: %d %s, want 404", path, got.status, got.raw)
			}
		}
		if got := f.do("POST", "/api/activities/"+url.PathEscape(p)+"/grab", victim, ""); got.status != http.StatusNotFound {
			t.Errorf("grab of activity %q: %d %s, want 404", p, got.status, got.raw)
		}
		// User ids, idempotency keys and blocked user ids are printable ASCII without spaces: a
		// payload with spaces is refused, and without them it is just a name. A user of that
		// name grabs once, and the key repeats its first answer.
		compact := strings.ReplaceAll(p, " ", "")
		attacker := f.user(compact)
		if strings.Contains(p, " ") {
			if got := f.do("POST", "/api/activities/"+id+"/grab", attacker, "", "Idempotency-Key", p); got.code() != "INVALID_ARGUMENT" {
				t.Errorf("key %q: %d %s, want 400 INVALID_ARGUMENT", p, got.status, got.raw)
			}
			if got := f.do("POST", "/api/admin/blocks", adminToken, fmt.Sprintf(`{"kind":"user","value":%q}`, p)); got.code() != "INVALID_ARGUMENT" {
				t.Errorf("block of user %q: %d %s, want 400 INVALID_ARGUMENT", p, got.status, got.raw)
			}
		}
		first := f.do("POST", "/api/activities/"+id+"/grab", attacker, "", "Idempotency-Key", compact)
		again := f.do("POST", "/api/activities/"+id+"/grab", attacker, "", "Idempotency-Key", compact)
		if first.status != http.StatusAccepted || again.body["order_token"] != first.body["order_token"] {
			t.Errorf("user and key %q: %d %s then %s", compact, first.status, first.raw, again.raw)
		}
		// A challenge id is looked up, never found.
		if got := f.do("POST", "/api/activities/"+id+"/challenge/answer", attacker,
			fmt.Sprintf(`{"challenge_id":%q,"answer":1}`, p)); got.code() != "CHALLENGE_FAILED" {
			t.Errorf("challenge id %q: %d %s", p, got.status, got.raw)
		}
		// The blacklist: a user entry is text, an address entry is refused.
		if got := f.do("POST", "/api/admin/blocks", adminToken, fmt.Sprintf(`{"kind":"user","value":%q,"reason":%q}`, compact, p)); got.status != http.StatusCreated || got.body["value"] != compact || got.body["reason"] != p {
			t.Errorf("block of user %q: %d %s", compact, got.status, got.raw)
		}
		if got := f.do("POST", "/api/admin/blocks", adminToken, fmt.Sprintf(`{"kind":"ip","value":%q}`, p)); got.code() != "INVALID_ARGUMENT" {
			t.Errorf("block of address %q: %d %s", p, got.status, got.raw)
		}
		if got := f.do("POST", "/api/admin/blocks", adminToken, fmt.Sprintf(`{"kind":%q,"value":"x"}`, p)); got.code() != "INVALID_ARGUMENT" {
			t.Errorf("block kind %q: %d %s", p, got.status, got.raw)
		}
		if got := f.do("DELETE", "/api/admin/blocks/user/"+url.PathEscape(compact), adminToken, ""); got.status != http.StatusNoContent {
			t.Errorf("unblock of user %q: %d %s", compact, got.status, got.raw)
		}
	}

	// Nothing else moved: the victim's order is intact and still theirs, every table is there,
	// and the sale counts exactly the victim and one grab per payload user.
	f.drain(id)
	if o := f.do("GET", "/api/orders/"+victims, victim, ""); o.body["status"] != "CREATED" {
		t.Fatalf("the victim's order after the attack: %d %s", o.status, o.raw)
	}
	c, err := f.store.Counts(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(1 + len(injections)); c.Orders != want || c.Created != want || c.Paid != 0 {
		t.Fatalf("orders %+v, want %d created, none paid", c, want)
	}
	if n := f.activities(); n != 1+len(injections) {
		t.Fatalf("%d activities, want %d", n, 1+len(injections))
	}
	if bs, err := f.store.Blocks(ctx, time.Time{}); err != nil || len(bs) != 0 {
		t.Fatalf("blacklist after the attack: %v, %v; want empty", bs, err)
	}
}
