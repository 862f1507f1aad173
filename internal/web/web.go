// Package web serves seckill's pages from files embedded in the binary: the front page, the
// product page (an item or a red packet) and the admin dashboard. The pages are the same for
// every visitor, so a CDN may cache them; everything that changes (stock, the clock, orders,
// the live stats) comes from the JSON API. There is no build step: plain HTML, CSS and
// JavaScript.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"regexp"
	"time"
)

//go:embed static
var files embed.FS

// Patterns are the routes Handler serves; the API server mounts it at each.
var Patterns = []string{"GET /{$}", "GET /activity/{id}", "GET /admin", "GET /static/{name}"}

// pages maps each page route to its file.
var pages = map[string]string{
	"GET /{$}":           "index.html",
	"GET /activity/{id}": "activity.html",
	"GET /admin":         "admin.html",
}

// csp keeps every page to its own scripts, styles and API: no inline script, no other origin,
// no framing. Captcha images arrive as data: URLs.
const csp = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// asset is one embedded file, ready to serve.
type asset struct {
	body  []byte
	etag  string // quoted, as the header carries it
	ctype string
}

// Handler serves the pages and their assets. Assets are named in the pages with their content's
// hash (/static/app.js?v=HASH), so a page always loads the assets of its own build and a cache
// may keep an asset forever; a page itself is revalidated on every load (by its ETag).
func Handler() (http.Handler, error) {
	assets := map[string]asset{}
	entries, err := fs.ReadDir(files, "static")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		b, err := files.ReadFile("static/" + e.Name())
		if err != nil {
			return nil, err
		}
		assets[e.Name()] = newAsset(e.Name(), b)
	}
	// Version every asset reference in the pages with the asset's hash.
	ref := regexp.MustCompile(`/static/([A-Za-z0-9._-]+)`)
	for name, a := range assets {
		if path.Ext(name) != ".html" {
			continue
		}
		var missing error
		body := ref.ReplaceAllFunc(a.body, func(m []byte) []byte {
			target, ok := assets[string(m[len("/static/"):])]
			if !ok {
				missing = fmt.Errorf("page %s names a missing asset %s", name, m)
				return m
			}
			return fmt.Appendf(nil, "%s?v=%s", m, target.etag[1:17])
		})
		if missing != nil {
			return nil, missing
		}
		assets[name] = newAsset(name, body)
	}

	mux := http.NewServeMux()
	for pattern, file := range pages {
		a := assets[file]
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			h.Set("Content-Security-Policy", csp)
			h.Set("X-Frame-Options", "DENY")
			h.Set("Referrer-Policy", "same-origin")
			h.Set("Cache-Control", "no-cache")
			a.serve(w, r)
		})
	}
	mux.HandleFunc("GET /static/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		a, ok := assets[name]
		if !ok || path.Ext(name) == ".html" {
			http.NotFound(w, r)
			return
		}
		if v := r.URL.Query().Get("v"); v != "" && v == a.etag[1:17] {
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			w.Header().Set("Cache-Control", "no-cache")
		}
		a.serve(w, r)
	})
	return mux, nil
}

func newAsset(name string, b []byte) asset {
	sum := sha256.Sum256(b)
	ctype := mime.TypeByExtension(path.Ext(name))
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	return asset{body: b, etag: `"` + hex.EncodeToString(sum[:16]) + `"`, ctype: ctype}
}

// serve answers with the asset, or 304 when the client's copy has its ETag.
func (a asset) serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("ETag", a.etag)
	h.Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}
