package httpapi

import (
	"net/http"
	"slices"

	"seckill/internal/sale"
)

// StageOf is stageOf, for the tests.
var StageOf = stageOf

// Patterns are the ServeMux patterns of the API's routes, on a node that has every feature.
func Patterns() []string {
	var out []string
	every := &Server{operator: &sale.Operator{}, payments: &sale.Payments{}, outbox: &sale.Outbox{}, lines: &sale.Lines{},
		boards: &sale.Boards{}, challenges: &sale.Challenges{}, blocks: &sale.Blocks{}, audit: &sale.Audit{}}
	for _, rt := range every.routes() {
		out = append(out, rt.pattern)
	}
	return out
}

// CodesByStatus are the error codes the server answers with each status: the error classes',
// the mux's 404 and 405, and the recovered panic's 500.
func CodesByStatus() map[int][]string {
	out := map[int][]string{
		http.StatusNotFound:            {CodeNotFound},
		http.StatusMethodNotAllowed:    {CodeMethodNotAllowed},
		http.StatusInternalServerError: {CodeInternal},
	}
	for _, c := range classes {
		if !slices.Contains(out[c.status], c.code) {
			out[c.status] = append(out[c.status], c.code)
		}
	}
	return out
}
