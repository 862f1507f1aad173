// Package contract holds the HTTP tests' requests and answers to the API's OpenAPI document
// (httpapi.OpenAPI), so that the document cannot drift from the code: an answer of a status,
// shape or error code the document does not give its route fails the test that got it, and so
// does a request the server accepted (2xx) that the document says is invalid. It is for tests.
//
// Wrap a handler with Handler, or a client's transport with Transport. Seen says which of the
// document's operations the tests have exercised, so that a suite can insist on all of them.
package openapitest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"seckill/internal/httpapi"
)

// Document is the API's OpenAPI document, loaded and validated once.
var Document = sync.OnceValues(func() (*openapi3.T, error) {
	doc, err := openapi3.NewLoader().LoadFromData(httpapi.OpenAPI())
	if err != nil {
		return nil, fmt.Errorf("load the OpenAPI document: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("the OpenAPI document is not valid: %w", err)
	}
	return doc, nil
})

// checker holds the document, its router, the body schemas compiled so far, and the operations
// seen. Bodies are checked with schemas compiled once each, by JSON pointer into the document:
// kin-openapi compiles a 3.1 schema again at every check (about a millisecond a body), which
// the crowds of the end-to-end tests cannot afford. It still checks the rest: the route, the
// status, the parameters, the headers and the content types.
type checker struct {
	doc    *openapi3.T
	router routers.Router
	mu     sync.Mutex
	seen   map[string]bool // operation id -> exercised
	comp   *jsonschema.Compiler
	bodies map[string]*jsonschema.Schema // JSON pointer -> compiled schema
}

// docURL is where the compiler finds the document.
const docURL = "mem:///openapi.json"

var the = sync.OnceValues(func() (*checker, error) {
	doc, err := Document()
	if err != nil {
		return nil, err
	}
	// The router matches a path against the document's; it does not read the servers' hosts.
	r, err := gorillamux.NewRouter(&openapi3.T{OpenAPI: doc.OpenAPI, Info: doc.Info, Paths: doc.Paths,
		Components: doc.Components, Servers: openapi3.Servers{{URL: "/"}}})
	if err != nil {
		return nil, fmt.Errorf("route the OpenAPI document: %w", err)
	}
	raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(httpapi.OpenAPI()))
	if err != nil {
		return nil, err
	}
	comp := jsonschema.NewCompiler()
	comp.DefaultDraft(jsonschema.Draft2020) // OpenAPI 3.1's dialect
	comp.AssertFormat()
	if err := comp.AddResource(docURL, raw); err != nil {
		return nil, err
	}
	return &checker{doc: doc, router: r, seen: map[string]bool{}, comp: comp, bodies: map[string]*jsonschema.Schema{}}, nil
})

func get(t TB) *checker {
	c, err := the()
	if err != nil {
		t.Fatalf("contract: %v", err)
	}
	return c
}

// TB is the part of testing.TB the checks report to.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Seen returns the ids of the document's operations the checked exchanges have exercised, and
// of those they have not.
func Seen() (seen, unseen []string) {
	c, err := the()
	if err != nil {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, path := range c.doc.Paths.InMatchingOrder() {
		for _, op := range c.doc.Paths.Value(path).Operations() {
			if c.seen[op.OperationID] {
				seen = append(seen, op.OperationID)
			} else {
				unseen = append(unseen, op.OperationID)
			}
		}
	}
	slices.Sort(seen)
	slices.Sort(unseen)
	return seen, unseen
}

// exchange is one request and its answer, as the server saw them.
type exchange struct {
	req     *http.Request
	reqBody []byte
	pattern string // the ServeMux pattern that took the request; "" when unknown
	status  int
	header  http.Header
	body    []byte
}

// check reports to t what in x the document does not allow.
func (c *checker) check(t TB, x exchange) {
	t.Helper()
	what := x.req.Method + " " + x.req.URL.RequestURI()
	route, params, err := c.route(x)
	if err != nil {
		// No route of the document: the server must say so in the API's own words.
		if x.status != http.StatusNotFound && x.status != http.StatusMethodNotAllowed {
			t.Errorf("contract: %s: %v, yet the server answered %d", what, err, x.status)
			return
		}
		if err := c.errorBody(x.body, "NOT_FOUND", "METHOD_NOT_ALLOWED"); err != nil {
			t.Errorf("contract: %s (no route): %v", what, err)
		}
		return
	}
	c.mu.Lock()
	c.seen[route.Operation.OperationID] = true
	c.mu.Unlock()

	if feature, _ := route.Operation.Extensions["x-feature"].(string); feature != "" && x.status == http.StatusNotFound && x.pattern == "" {
		// A node without the feature has no such route: the mux's own 404 (a route it has
		// answers its 404s as the document says).
		if err := c.errorBody(x.body, "NOT_FOUND"); err != nil {
			t.Errorf("contract: %s (a route of %s): %v", what, feature, err)
		}
		return
	}
	req := x.req.Clone(context.Background())
	req.Body = io.NopCloser(bytes.NewReader(x.reqBody))
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: bearer, MultiError: true, ExcludeRequestBody: true}}
	if x.status >= 200 && x.status < 300 {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			t.Errorf("contract: %s was accepted (%d), but the document refuses it: %v", what, x.status, err)
		}
		if err := c.requestBody(route, x.req.Header.Get("Content-Type"), x.reqBody); err != nil {
			t.Errorf("contract: %s was accepted (%d), but the document refuses its body: %v", what, x.status, err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: x.status, Header: x.header,
		Body:    io.NopCloser(bytes.NewReader(x.body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true, ExcludeResponseBody: true}}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("contract: %s answered %d: %v\n%s", what, x.status, err, clip(x.body))
		return
	}
	resp := route.Operation.Responses.Status(x.status)
	if err := c.responseBody(route, x, resp); err != nil {
		t.Errorf("contract: %s answered %d: %v\n%s", what, x.status, err, clip(x.body))
		return
	}
	// A payment provider's notice is answered in the provider's words (x-provider-format),
	// which the schema above has checked; every other refusal is the API's error.
	if x.status >= 400 && route.Operation.Extensions["x-provider-format"] != true {
		if err := c.errorBody(x.body, codesOf(resp)...); err != nil {
			t.Errorf("contract: %s answered %d: %v", what, x.status, err)
		}
	}
}

// requestBody checks an accepted request's body against the route's. The server reads every
// body as JSON, whatever its Content-Type says, but where the document takes another type
// alone (a provider's form-encoded notice): such a body is the provider's, checked by its
// signature, not by a schema.
func (c *checker) requestBody(route *routers.Route, contentType string, body []byte) error {
	rb := route.Operation.RequestBody
	switch {
	case rb == nil && len(body) > 0:
		return errors.New("the route takes no body")
	case rb == nil:
		return nil
	case len(body) == 0 && rb.Value.Required:
		return errors.New("the body is required")
	case len(body) == 0:
		return nil
	}
	if rb.Value.Content.Get("application/json") == nil {
		mt, _, _ := mime.ParseMediaType(contentType)
		if rb.Value.Content.Get(mt) == nil {
			return fmt.Errorf("the document takes no %q body", contentType)
		}
		return nil
	}
	base := rb.Ref
	if base == "" {
		base = "#" + operationPointer(route) + "/requestBody"
	}
	return c.validate(base+"/content/application~1json/schema", body)
}

// responseBody checks an answer's body against the schema the document gives its status and
// content type, event by event for a stream of Server-Sent Events.
func (c *checker) responseBody(route *routers.Route, x exchange, resp *openapi3.ResponseRef) error {
	if resp == nil || len(resp.Value.Content) == 0 {
		if len(x.body) > 0 {
			return errors.New("the document gives this answer no body")
		}
		return nil
	}
	mt, _, err := mime.ParseMediaType(x.header.Get("Content-Type"))
	if err != nil {
		return fmt.Errorf("the Content-Type %q: %v", x.header.Get("Content-Type"), err)
	}
	base := resp.Ref
	if base == "" {
		base = "#" + operationPointer(route) + "/responses/" + strconv.Itoa(x.status)
	}
	media := resp.Value.Content.Get(mt)
	switch {
	case media == nil:
		return fmt.Errorf("the document gives this answer no %s content", mt)
	case mt == "text/event-stream":
		return c.events(media, x.body)
	case mt != "application/json":
		return nil // text: the document says no more than that
	}
	return c.validate(base+"/content/"+escape(mt)+"/schema", x.body)
}

// validate checks body, JSON, against the schema at pointer (a fragment, "#/...") in the
// document, compiled on first use.
func (c *checker) validate(pointer string, body []byte) error {
	c.mu.Lock()
	sch, ok := c.bodies[pointer]
	if !ok {
		var err error
		if sch, err = c.comp.Compile(docURL + braces.Replace(pointer)); err != nil {
			c.mu.Unlock()
			return fmt.Errorf("compile the document's schema at %s: %v", pointer, err)
		}
		c.bodies[pointer] = sch
	}
	c.mu.Unlock()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("the body is not JSON: %v", err)
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("the body does not match %s: %v", pointer, err)
	}
	return nil
}

// operationPointer is the JSON pointer of route's operation in the document.
func operationPointer(route *routers.Route) string {
	return "/paths/" + escape(route.Path) + "/" + strings.ToLower(route.Method)
}

// escape makes s one token of a JSON pointer.
func escape(s string) string { return pointerToken.Replace(s) }

var (
	pointerToken = strings.NewReplacer("~", "~0", "/", "~1")
	braces       = strings.NewReplacer("{", "%7B", "}", "%7D") // a pointer in a URL's fragment
)

// route finds the document's operation for x: by the ServeMux pattern that took it when known
// (a network's block value keeps its slash, which no OpenAPI path parameter matches), else by
// the document's router.
func (c *checker) route(x exchange) (*routers.Route, map[string]string, error) {
	if x.pattern == "" {
		return c.router.FindRoute(x.req)
	}
	method, path, _ := strings.Cut(x.pattern, " ")
	path = strings.ReplaceAll(path, "...}", "}")
	item := c.doc.Paths.Value(path)
	if item == nil || item.GetOperation(method) == nil {
		return nil, nil, fmt.Errorf("the server routes %q, and the document has no such operation", x.pattern)
	}
	params := map[string]string{}
	for _, seg := range strings.Split(path, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			name = strings.TrimSuffix(name, "}")
			params[name] = x.req.PathValue(name)
		}
	}
	return &routers.Route{Spec: c.doc, Path: path, PathItem: item, Method: method, Operation: item.GetOperation(method)}, params, nil
}

// bearer is the document's security check: the request carries a bearer token. Whether the
// token is good is the server's to say, and its 401s are checked as answers.
func bearer(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	h := in.RequestValidationInput.Request.Header.Get("Authorization")
	if len(h) < 8 || !strings.EqualFold(h[:7], "bearer ") {
		return errors.New("no bearer token")
	}
	return nil
}

// codesOf are the error codes a documented answer may carry (its x-codes).
func codesOf(resp *openapi3.ResponseRef) []string {
	if resp == nil || resp.Value == nil {
		return nil
	}
	var codes []string
	switch v := resp.Value.Extensions["x-codes"].(type) {
	case []any:
		for _, c := range v {
			if s, ok := c.(string); ok {
				codes = append(codes, s)
			}
		}
	}
	return codes
}

// errorBody checks that body is the API's error with one of codes.
func (c *checker) errorBody(body []byte, codes ...string) error {
	var e struct {
		Error struct {
			Code, Message string
		}
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Code == "" {
		return fmt.Errorf("the body is not the API's error: %s", clip(body))
	}
	if !slices.Contains(codes, e.Error.Code) {
		return fmt.Errorf("error code %s, and the document gives this answer only %v", e.Error.Code, codes)
	}
	return nil
}

// events checks each event of a Server-Sent Events answer against the schema the document
// names in the media's x-event-data.
func (c *checker) events(media *openapi3.MediaType, body []byte) error {
	ref, _ := media.Extensions["x-event-data"].(map[string]any)
	pointer, _ := ref["$ref"].(string)
	if !strings.HasPrefix(pointer, "#/") {
		return fmt.Errorf("the event stream's x-event-data names no schema (%q)", pointer)
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			if err := c.validate(pointer, []byte(data)); err != nil {
				return fmt.Errorf("an event's data: %v", err)
			}
		}
	}
	return sc.Err()
}

func clip(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "..."
	}
	return string(b)
}
