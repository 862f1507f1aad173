package httpapi_test

import (
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"seckill/internal/dbtest"
	"seckill/internal/httpapi"
	"seckill/internal/metrics"
	"seckill/internal/openapitest"
	"seckill/internal/sale"
	"seckill/internal/saletest"
)

// TestMain runs the suite, whose every exchange the fixture checks against the OpenAPI document
// (openapitest.Handler), and then, when the whole suite ran and passed, insists that it exercised
// every operation the document describes: a route documented and never tested is as likely to
// have drifted as one undocumented.
func TestMain(m *testing.M) {
	code := m.Run()
	dbtest.StopAll()
	if code == 0 && flag.Lookup("test.run").Value.String() == "" && !testing.Short() {
		if _, unseen := openapitest.Seen(); len(unseen) > 0 {
			fmt.Fprintf(os.Stderr, "contract: the suite never exercised these operations of the OpenAPI document: %s\n",
				strings.Join(unseen, ", "))
			code = 1
		}
	}
	os.Exit(code)
}

// TestOpenAPIDocument: the document loads and is valid OpenAPI 3.1, and it describes exactly
// the server's routes.
func TestOpenAPIDocument(t *testing.T) {
	doc, err := openapitest.Document()
	if err != nil {
		t.Fatal(err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("the document is OpenAPI %s, want 3.1", doc.OpenAPI)
	}
	var documented []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	var served []string
	for _, p := range httpapi.Patterns() {
		served = append(served, strings.ReplaceAll(p, "...}", "}"))
	}
	slices.Sort(documented)
	slices.Sort(served)
	if !slices.Equal(documented, served) {
		t.Fatalf("the document's operations differ from the server's routes:\ndocumented %q\nserved     %q", documented, served)
	}
}

// TestOpenAPIFeatures: the document marks each route of a feature with its name (x-feature),
// and no route of the core: what it says a node without the feature lacks is what the server
// leaves out.
func TestOpenAPIFeatures(t *testing.T) {
	doc, err := openapitest.Document()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for pattern, want := range httpapi.FeatureOf() {
		method, path, _ := strings.Cut(strings.ReplaceAll(pattern, "...}", "}"), " ")
		item := doc.Paths.Value(path)
		if item == nil || item.GetOperation(method) == nil {
			t.Errorf("%s is not in the document", pattern)
			continue
		}
		got, _ := item.GetOperation(method).Extensions["x-feature"].(string)
		if got != want {
			t.Errorf("%s: x-feature %q, want %q", pattern, got, want)
		}
		seen[want] = true
	}
	if n := reflect.TypeFor[sale.Features]().NumField(); len(seen) != 1+n {
		t.Errorf("the routes belong to %d features and the core, want the %d of sale.Features: %v", len(seen)-1, n, seen)
	}
}

// TestOpenAPIPageLimits: the document bounds every list's ?limit= as the service does, by the
// one rule of a page (sale.MaxPage), and a leaderboard's by sale.MaxBoard.
func TestOpenAPIPageLimits(t *testing.T) {
	doc, err := openapitest.Document()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for _, p := range op.Parameters {
				if p.Value == nil || p.Value.In != "query" || p.Value.Name != "limit" {
					continue
				}
				n++
				want := float64(sale.MaxPage)
				if strings.HasSuffix(path, "/leaderboard") {
					want = float64(sale.MaxBoard)
				}
				var lo, hi float64
				if s := p.Value.Schema.Value; s.Min != nil && s.Max != nil {
					lo, hi = *s.Min, *s.Max
				}
				if lo != 1 || hi != want {
					t.Errorf("%s %s: ?limit= is %v to %v, want 1 to %v", method, path, lo, hi, want)
				}
			}
		}
	}
	if n < 7 {
		t.Errorf("the document has %d ?limit= parameters, want the 7 lists'", n)
	}
}

// TestOpenAPIServed: every node serves the document at GET /openapi.json, as JSON, cacheable.
func TestOpenAPIServed(t *testing.T) {
	f := newFixture(t, false)
	r := f.do("GET", "/openapi.json", "", "")
	if r.status != 200 || r.header.Get("Content-Type") != "application/json" || r.header.Get("Cache-Control") != "public, max-age=300" {
		t.Fatalf("GET /openapi.json: %d %v", r.status, r.header)
	}
	if r.raw != string(httpapi.OpenAPI()) || r.body["openapi"] != "3.1.0" {
		t.Fatalf("GET /openapi.json is not the embedded document: openapi %v", r.body["openapi"])
	}
}

// TestMetricsCountedNotServed: with the node's metrics wired in, the API counts the grabs in
// them (their Prometheus text says so), and does not serve them: GET /metrics is not found on
// the API, whose port the public reaches. The node serves them on a listener of its own.
func TestMetricsCountedNotServed(t *testing.T) {
	m := metrics.New()
	f := newFixtureWith(t, func(c *httpapi.Config, _ *saletest.Clock) { c.Observe = m })
	id := f.create(validItem)
	f.do("POST", "/api/activities/"+id+"/grab", f.user("u1"), "")
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") ||
		!strings.Contains(rec.Body.String(), `seckill_grab_requests_total{outcome="won"} 1`) {
		t.Fatalf("the metrics after a grab: %d %q\n%s", rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
	}
	rec = httptest.NewRecorder()
	f.h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusNotFound || strings.Contains(rec.Body.String(), "seckill_") {
		t.Fatalf("GET /metrics on the API: %d\n%s\nwant 404: the metrics are not the public's", rec.Code, rec.Body.String())
	}
}

// TestOpenAPIErrorCodes: each documented error answer lists (x-codes) codes that the server
// gives that status (but the providers' notices', answered in each provider's words: x-provider-format), together they list all of them but INTERNAL, and the error schema's
// enum is every code.
func TestOpenAPIErrorCodes(t *testing.T) {
	doc, err := openapitest.Document()
	if err != nil {
		t.Fatal(err)
	}
	byStatus := httpapi.CodesByStatus()
	listed := map[int][]string{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.Extensions["x-provider-format"] == true {
				continue // a provider's notices are answered in the provider's words, not with our codes
			}
			for key, resp := range op.Responses.Map() {
				status, _ := strconv.Atoi(key)
				if status < 400 {
					continue
				}
				codes, _ := resp.Value.Extensions["x-codes"].([]any)
				if len(codes) == 0 {
					t.Errorf("%s %s: answer %d lists no x-codes", method, path, status)
				}
				for _, c := range codes {
					code := c.(string)
					if !slices.Contains(byStatus[status], code) {
						t.Errorf("%s %s: answer %d lists %s, which the server never answers with %d", method, path, status, code, status)
					}
					if !slices.Contains(listed[status], code) {
						listed[status] = append(listed[status], code)
					}
				}
			}
		}
	}
	var all []string
	for status, codes := range byStatus {
		all = append(all, codes...)
		if status == 500 || status == 405 { // any route; the document's description says so
			continue
		}
		for _, c := range codes {
			if !slices.Contains(listed[status], c) {
				t.Errorf("no route's %d answer lists %s", status, c)
			}
		}
	}
	var enum []string
	for _, v := range doc.Components.Schemas["ErrorDetail"].Value.Properties["code"].Value.Enum {
		enum = append(enum, v.(string))
	}
	slices.Sort(all)
	all = slices.Compact(all) // a code may come with two statuses (NOT_RESERVED: 403 and 404)
	slices.Sort(enum)
	if !slices.Equal(all, enum) {
		t.Errorf("the error code enum is %v, the server's codes %v", enum, all)
	}
}
