package httpapi

import (
	"net/http"
	"slices"

	"seckill/internal/httpapi/wire"
	"seckill/internal/sale"
)

// StageOf is stageOf, for the tests.
var StageOf = stageOf

// Patterns are the ServeMux patterns of the API's routes, on a node that has every feature.
func Patterns() []string {
	var out []string
	every := &Server{operator: &sale.Operator{}, payments: &sale.Payments{}, outbox: &sale.Outbox{}, lines: &sale.Lines{},
		boards: &sale.Boards{}, challenges: &sale.Challenges{}, blocks: &sale.Blocks{}, audit: &sale.Audit{},
		reservations: &sale.Reservations{}, forecasts: &sale.Forecasts{}, callback: &Callback{}, notices: everyProvider}
	for _, rt := range every.routes() {
		out = append(out, rt.pattern)
	}
	return out
}

// FeatureOf is the feature of each route's pattern ("" for the core's): the feature without
// which the server has no such route (the field of sale.Features, in lower case).
func FeatureOf() map[string]string {
	out := map[string]string{}
	for _, rt := range (&Server{}).routes() {
		out[rt.pattern] = ""
	}
	for name, s := range map[string]*Server{"operator": {operator: &sale.Operator{}}, "payments": {payments: &sale.Payments{}, callback: &Callback{}, notices: everyProvider},
		"outbox": {outbox: &sale.Outbox{}}, "lines": {lines: &sale.Lines{}}, "boards": {boards: &sale.Boards{}},
		"challenges": {challenges: &sale.Challenges{}}, "blocks": {blocks: &sale.Blocks{}}, "audit": {audit: &sale.Audit{}},
		"reservations": {reservations: &sale.Reservations{}}, "forecasts": {forecasts: &sale.Forecasts{}}} {
		for _, rt := range s.routes() {
			if _, core := out[rt.pattern]; !core {
				out[rt.pattern] = name
			}
		}
	}
	return out
}

// CodesByStatus are the error codes the server answers with each status: the error classes',
// the mux's 404 and 405, and the recovered panic's 500.
func CodesByStatus() map[int][]string {
	out := map[int][]string{
		http.StatusNotFound:            {wire.CodeNotFound},
		http.StatusMethodNotAllowed:    {wire.CodeMethodNotAllowed},
		http.StatusInternalServerError: {wire.CodeInternal},
	}
	for _, c := range classes {
		if !slices.Contains(out[c.status], c.code) {
			out[c.status] = append(out[c.status], c.code)
		}
	}
	return out
}

// everyProvider are notice readers of the names of every provider the node may have.
var everyProvider = []Notices{named("stripe"), named("alipay"), named("wechatpay")}

// named is a notice reader of a name, which reads nothing.
type named string

func (n named) Name() string { return string(n) }

func (named) Notice(http.Header, []byte) (sale.PaymentNotice, bool, error) {
	return sale.PaymentNotice{}, false, nil
}

func (named) Answer(http.ResponseWriter, error) {}
