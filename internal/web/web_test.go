package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"seckill/internal/web"
)

func serve(t testing.TB) http.Handler {
	t.Helper()
	h, err := web.Handler()
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for _, p := range web.Patterns {
		mux.Handle(p, h)
	}
	return mux
}

func get(t testing.TB, h http.Handler, path string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestPagesAndTheirAssets(t *testing.T) {
	h := serve(t)
	ref := regexp.MustCompile(`/static/[A-Za-z0-9._-]+\?v=[0-9a-f]{16}`)
	description := regexp.MustCompile(`<meta name="description" content="([^"]*)">`)
	for path, title := range map[string]string{"/": "seckill — sales", "/activity/demo": "seckill", "/admin": "seckill — dashboard"} {
		rec := get(t, h, path)
		body := rec.Body.String()
		if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") ||
			!strings.Contains(body, "<title>"+title+"</title>") {
			t.Fatalf("GET %s: %d %s %.80q", path, rec.Code, rec.Header().Get("Content-Type"), body)
		}
		// Search engines show a page's description; Lighthouse's SEO audit asks for one.
		if m := description.FindStringSubmatch(body); m == nil || len(m[1]) < 50 || len(m[1]) > 160 {
			t.Errorf("GET %s: meta description %q, want one of 50 to 160 characters", path, m)
		}
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") ||
			!strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s: CSP %q", path, csp)
		}
		if strings.Contains(body, "<script>") || strings.Contains(body, " style=") || strings.Contains(body, " onclick=") {
			t.Errorf("GET %s: inline script or style, which the CSP forbids", path)
		}
		refs := ref.FindAllString(body, -1)
		if len(refs) < 2 {
			t.Fatalf("GET %s: asset references %v, want each versioned with its hash", path, refs)
		}
		for _, r := range refs {
			a := get(t, h, r)
			if a.Code != 200 || a.Header().Get("Cache-Control") != "public, max-age=31536000, immutable" {
				t.Errorf("GET %s: %d %q", r, a.Code, a.Header().Get("Cache-Control"))
			}
		}
		// The page is revalidated: its ETag answers 304.
		if again := get(t, h, path, "If-None-Match", rec.Header().Get("ETag")); again.Code != 304 {
			t.Errorf("GET %s with its ETag: %d, want 304", path, again.Code)
		}
	}
	if rec := get(t, h, "/static/app.css?v=0000000000000000"); rec.Code != 200 || rec.Header().Get("Cache-Control") != "no-cache" {
		t.Errorf("an asset asked for with a stale version: %d %q, want 200 no-cache", rec.Code, rec.Header().Get("Cache-Control"))
	}
	for _, path := range []string{"/static/nope.js", "/static/admin.html", "/static/"} {
		if rec := get(t, h, path); rec.Code != 404 {
			b, _ := io.ReadAll(rec.Body)
			t.Errorf("GET %s: %d %s, want 404", path, rec.Code, b)
		}
	}
}

// FuzzPagePaths: any path under the pages' routes is a page, an asset, or 404; never an error,
// never a page's source as an asset.
func FuzzPagePaths(f *testing.F) {
	for _, p := range []string{"/", "/activity/demo", "/activity/", "/activity/a/b", "/admin", "/admin/", "/static/app.css",
		"/static/../web.go", "/static/%2e%2e/web.go", "/static/index.html", "/static/app.css/x", "/static/\x00", "//admin"} {
		f.Add(p)
	}
	h := serve(f)
	f.Fuzz(func(t *testing.T, path string) {
		req := httptest.NewRequest("GET", "/", nil)
		req.URL.Path = path
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case 200:
			ct := rec.Header().Get("Content-Type")
			if strings.HasPrefix(ct, "text/html") && rec.Header().Get("Content-Security-Policy") == "" {
				t.Fatalf("%q: a page without its CSP", path)
			}
			if strings.Contains(rec.Body.String(), "package web") {
				t.Fatalf("%q served Go source", path)
			}
		case 301, 307, 308, 404, 405:
		default:
			t.Fatalf("%q: %d", path, rec.Code)
		}
	})
}

// TestEveryFieldHasALabel: each input and select of the pages is named by a <label for=...>, or
// sits inside a label; each image has alt text; each canvas has a role and a label.
func TestEveryFieldHasALabel(t *testing.T) {
	h := serve(t)
	field := regexp.MustCompile(`<(input|select)\b[^>]*\bid="([^"]+)"`)
	wrapped := regexp.MustCompile(`<label[^>]*>\s*<input\b[^>]*\bid="([^"]+)"`)
	for _, path := range []string{"/", "/activity/x", "/admin"} {
		body := get(t, h, path).Body.String()
		inLabel := map[string]bool{}
		for _, m := range wrapped.FindAllStringSubmatch(body, -1) {
			inLabel[m[1]] = true
		}
		fields := field.FindAllStringSubmatch(body, -1)
		for _, m := range fields {
			if id := m[2]; !inLabel[id] && !strings.Contains(body, `<label for="`+id+`"`) {
				t.Errorf("%s: <%s id=%q> has no label", path, m[1], id)
			}
		}
		for _, img := range regexp.MustCompile(`<img\b[^>]*>`).FindAllString(body, -1) {
			if !regexp.MustCompile(`\balt="[^"]+"`).MatchString(img) {
				t.Errorf("%s: %s has no alt text", path, img)
			}
		}
		for _, c := range regexp.MustCompile(`<canvas\b[^>]*>`).FindAllString(body, -1) {
			if !strings.Contains(c, `role="img"`) || !strings.Contains(c, `aria-label="`) {
				t.Errorf("%s: %s is not labelled", path, c)
			}
		}
		if path == "/admin" && len(fields) < 8 {
			t.Errorf("%s: found %d fields; the check is not reading the page", path, len(fields))
		}
	}
}
