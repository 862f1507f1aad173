package httpapi_test

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"seckill/internal/httpapi"
)

// TestIntegratingDocListsEveryErrorCode holds the error codes of docs/integrating.md to the
// server's: each status's row names exactly the codes the server answers with that status, and
// every status the server answers an error with has its row.
func TestIntegratingDocListsEveryErrorCode(t *testing.T) {
	doc, err := os.ReadFile("../../docs/integrating.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "\n### Error codes\n")
	if !ok {
		t.Fatal("docs/integrating.md has no Error codes section")
	}
	table, _, _ = strings.Cut(table, "\n#")
	code := regexp.MustCompile("`([A-Z][A-Z_]+)`")
	rows := map[int][]string{}
	for _, m := range regexp.MustCompile(`(?m)^\| (\d{3}) \| (.*) \|$`).FindAllStringSubmatch(table, -1) {
		status, _ := strconv.Atoi(m[1])
		for _, c := range code.FindAllStringSubmatch(m[2], -1) {
			rows[status] = append(rows[status], c[1])
		}
	}
	for status, codes := range httpapi.CodesByStatus() {
		got := slices.Clone(rows[status])
		slices.Sort(got)
		slices.Sort(codes)
		if !slices.Equal(got, codes) {
			t.Errorf("docs/integrating.md gives %d the codes %v; the server answers it with %v", status, got, codes)
		}
		delete(rows, status)
	}
	for status, codes := range rows {
		t.Errorf("docs/integrating.md gives %d the codes %v; the server never answers an error with %d", status, codes, status)
	}
}

// TestIntegratingDocListsEveryRoute holds the route table of docs/integrating.md to the server's
// routes: every route has its row, and every /api/ route the table gives is one the server
// serves (a path's parameters may be named differently; the query is left out).
func TestIntegratingDocListsEveryRoute(t *testing.T) {
	doc, err := os.ReadFile("../../docs/integrating.md")
	if err != nil {
		t.Fatal(err)
	}
	_, api, ok := strings.Cut(string(doc), "\n## The HTTP API\n")
	if !ok {
		t.Fatal("docs/integrating.md has no HTTP API section")
	}
	api, _, _ = strings.Cut(api, "\n#")
	param := regexp.MustCompile(`\{[^}]*\}`)
	route := func(s string) string {
		s, _, _ = strings.Cut(s, "?")
		return param.ReplaceAllString(s, "{}")
	}
	listed := map[string]bool{}
	for _, row := range regexp.MustCompile("(?m)^\\| (`[A-Z]+ /.*?) \\|").FindAllStringSubmatch(api, -1) {
		for _, m := range regexp.MustCompile("`([A-Z]+ /[^`]*)`").FindAllStringSubmatch(row[1], -1) {
			listed[route(m[1])] = true
		}
	}
	served := map[string]bool{}
	for _, p := range httpapi.Patterns() {
		served[route(p)] = true
		if !listed[route(p)] {
			t.Errorf("docs/integrating.md's route table has no row for %s", p)
		}
	}
	for r := range listed {
		if strings.Contains(r, " /api/") && !served[r] {
			t.Errorf("docs/integrating.md lists %s, which the server does not serve", r)
		}
	}
	if len(served) < 30 {
		t.Fatalf("the server has %d routes: they were not all read", len(served))
	}
}
