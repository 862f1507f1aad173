package httpapi

import (
	_ "embed"
	"net/http"
	"sync"

	"sigs.k8s.io/yaml"
)

// openapiYAML is the API's contract, written as YAML for people; GET /openapi.json serves it as
// JSON. The contract tests (internal/openapitest) hold every request and answer of the HTTP tests
// to it.
//
//go:embed openapi.yaml
var openapiYAML []byte

// OpenAPI returns the API's OpenAPI 3.1 document as JSON.
var OpenAPI = sync.OnceValue(func() []byte {
	b, err := yaml.YAMLToJSON(openapiYAML)
	if err != nil {
		panic("httpapi: the embedded openapi.yaml is not YAML: " + err.Error()) // TestOpenAPIDocument
	}
	return b
})

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h["Content-Type"] = jsonType
	h.Set("Cache-Control", "public, max-age=300")
	w.Write(OpenAPI())
}
