package openapitest

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// recordT is a TB that keeps what is reported.
type recordT struct {
	testing.TB
	errs []string
}

func (r *recordT) Helper()                        {}
func (r *recordT) Errorf(format string, a ...any) { r.errs = append(r.errs, format) }
func (r *recordT) Fatalf(format string, a ...any) { r.errs = append(r.errs, format) }

func grabExchange(body string, status int) exchange {
	req := httptest.NewRequest("POST", "/api/activities/a1/grab", nil)
	req.Header.Set("Authorization", "Bearer x.y.z")
	return exchange{req: req, status: status, header: http.Header{"Content-Type": {"application/json"}}, body: []byte(body)}
}

// TestCheckFindsDrift: an answer the document gives passes; one with an unknown field, a wrong
// type, an undocumented status or a code the status does not carry is reported.
func TestCheckFindsDrift(t *testing.T) {
	c := get(t)
	for name, tc := range map[string]struct {
		x    exchange
		fail bool
	}{
		"documented":                      {grabExchange(`{"status":"QUEUED","order_token":"o-1","amount_cents":100}`, 202), false},
		"an unknown field":                {grabExchange(`{"status":"QUEUED","order_token":"o-1","amount_cents":100,"quantity":2}`, 202), true},
		"a wrong type":                    {grabExchange(`{"status":"QUEUED","order_token":"o-1","amount_cents":"100"}`, 202), true},
		"undocumented 200":                {grabExchange(`{"status":"QUEUED","order_token":"o-1","amount_cents":100}`, 200), true},
		"a documented error":              {grabExchange(`{"error":{"code":"SOLD_OUT","message":"sold out"}}`, 410), false},
		"another status's code":           {grabExchange(`{"error":{"code":"BUSY","message":"busy"}}`, 410), true},
		"an error not in the API's shape": {grabExchange(`{"message":"sold out"}`, 410), true},
	} {
		rt := &recordT{TB: t}
		c.check(rt, tc.x)
		if failed := len(rt.errs) > 0; failed != tc.fail {
			t.Errorf("%s: reported %q, want reported=%v", name, rt.errs, tc.fail)
		}
	}
}

// BenchmarkCheck is the cost of checking one grab's exchange, what the contract adds to each
// request of the HTTP tests.
func BenchmarkCheck(b *testing.B) {
	c := get(b)
	rt := &recordT{TB: b}
	for b.Loop() {
		c.check(rt, grabExchange(`{"status":"QUEUED","order_token":"o-1","amount_cents":100}`, 202))
	}
	if len(rt.errs) > 0 {
		b.Fatal(rt.errs)
	}
}

// BenchmarkCheckRefusal is the cost of checking a refused grab's exchange (a 410), what most of
// a crowd's clicks get: no request validation, the error body against its schema.
func BenchmarkCheckRefusal(b *testing.B) {
	c := get(b)
	rt := &recordT{TB: b}
	for b.Loop() {
		c.check(rt, grabExchange(`{"error":{"code":"SOLD_OUT","message":"sold out"}}`, 410))
	}
	if len(rt.errs) > 0 {
		b.Fatal(rt.errs)
	}
}
