package openapitest

import (
	"bytes"
	"io"
	"net/http"
	"strings"
)

// Handler is h with every exchange it serves whose path checked says belongs to the API checked
// against the document and reported to t.
func Handler(t TB, h http.Handler, checked func(path string) bool) http.Handler {
	t.Helper()
	c := get(t)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !checked(r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		body, err := readAll(&r.Body)
		if err != nil {
			t.Errorf("contract: read the request body: %v", err)
		}
		cw := &capture{ResponseWriter: w}
		h.ServeHTTP(cw, r)
		c.check(t, exchange{req: r, reqBody: body, pattern: r.Pattern, status: cw.code(), header: w.Header(),
			body: cw.body.Bytes()})
	})
}

// Transport is rt (nil: http.DefaultTransport) with every exchange whose path checked says
// belongs to the API checked against the document and reported to t. The answers' bodies are
// read whole before the caller sees them, so it is not for streams that never end.
func Transport(t TB, rt http.RoundTripper, checked func(path string) bool) http.RoundTripper {
	t.Helper()
	c := get(t)
	if rt == nil {
		rt = http.DefaultTransport
	}
	return roundTrip(func(r *http.Request) (*http.Response, error) {
		if !checked(r.URL.Path) {
			return rt.RoundTrip(r)
		}
		var body []byte
		if r.Body != nil {
			b, err := readAll(&r.Body)
			if err != nil {
				return nil, err
			}
			body = b
		}
		resp, err := rt.RoundTrip(r)
		if err != nil {
			return resp, err
		}
		got, err := readAll(&resp.Body)
		if err != nil {
			return nil, err
		}
		c.check(t, exchange{req: r, reqBody: body, status: resp.StatusCode, header: resp.Header, body: got})
		return resp, nil
	})
}

// Everything is every path: for a server without pages, whose every answer (an unknown
// route's too) is the API's.
func Everything(string) bool { return true }

// APIPath says whether path is the API's rather than a page's.
func APIPath(path string) bool {
	return strings.HasPrefix(path, "/api/") || path == "/healthz" || path == "/readyz" || path == "/openapi.json"
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// readAll reads *body whole and puts back a reader of the same bytes.
func readAll(body *io.ReadCloser) ([]byte, error) {
	if *body == nil || *body == http.NoBody {
		return nil, nil
	}
	b, err := io.ReadAll(*body)
	(*body).Close()
	*body = io.NopCloser(bytes.NewReader(b))
	return b, err
}

// capture is a ResponseWriter that keeps a copy of what is written.
type capture struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (c *capture) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
	c.ResponseWriter.WriteHeader(status)
}

func (c *capture) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	c.body.Write(b)
	return c.ResponseWriter.Write(b)
}

func (c *capture) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *capture) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (c *capture) code() int {
	if c.status == 0 {
		return http.StatusOK
	}
	return c.status
}
