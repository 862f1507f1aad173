// Package wire is seckill's HTTP API as Go types: the JSON bodies of the requests and answers
// and the error codes, shared by the server (internal/httpapi, which declares the routes and
// checks what comes in) and its clients (seckill bench, the tests), so that a field renamed on
// one side cannot leave the other decoding zeros. The OpenAPI document (httpapi/openapi.yaml)
// says the same for clients in other languages, and the suites hold every answer to it.
//
// Each file is named after the httpapi file of the handlers that use its types. The package
// holds no logic: what a request means in the domain's terms is httpapi's to decide.
package wire
