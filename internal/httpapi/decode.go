package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"seckill/internal/sale"
)

var (
	errNoBearer = fmt.Errorf("%w: missing bearer token", sale.ErrUnauthorized)
	errBadAdmin = fmt.Errorf("%w: missing or wrong admin token", sale.ErrUnauthorized)
)

// decode reads exactly one JSON object into v: anything else (empty, another JSON value,
// trailing data), unknown fields and bodies over MaxBody are refused with errors that map to 400
// and 413.
func decode(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body) // bounded by ServeHTTP's MaxBytesReader
	if err != nil {
		return decodeError(err)
	}
	return decodeObject(body, v)
}

// MaxEmptyBody bounds the body of a route that defines few fields or none (a grab and its page
// signals, a payment, a cancellation, a challenge): ample for a JSON object of them, and a
// refusal without reading for anything bigger.
const MaxEmptyBody = 1 << 10

// decodeEmpty checks the body of a route that takes none: no body at all, or a JSON object of
// the fields v defines (none, for an empty struct), so that a client who believes it can send
// {"quantity": 2} learns that it cannot. Anything else is refused as decode refuses it.
func decodeEmpty(w http.ResponseWriter, r *http.Request, v any) error {
	if r.ContentLength == 0 { // the server's own word that there is no body: the hot path
		return nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxEmptyBody))
	if err != nil {
		return decodeError(err)
	}
	if len(body) == 0 { // a chunked body of no bytes
		return nil
	}
	return decodeObject(body, v)
}

// decodeObject decodes body, which must hold exactly one JSON object, into v.
func decodeObject(body []byte, v any) error {
	switch lead := bytes.TrimLeft(body, " \t\r\n"); {
	case len(lead) == 0:
		return decodeError(io.EOF)
	case lead[0] != '{': // null, an array, a string: valid JSON, but not an object
		return fmt.Errorf("%w: the body must be a JSON object", sale.ErrInvalid)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		if err != nil {
			return decodeError(err)
		}
		return fmt.Errorf("%w: the body must hold one JSON object", sale.ErrInvalid)
	}
	return nil
}

func decodeError(err error) error {
	var tooBig *http.MaxBytesError
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &tooBig):
		return fmt.Errorf("%w: the body is over %d bytes", sale.ErrTooLarge, tooBig.Limit)
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: the body is empty; a JSON object is required", sale.ErrInvalid)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: the JSON body is truncated", sale.ErrInvalid)
	case errors.As(err, &syntax):
		return fmt.Errorf("%w: malformed JSON at byte %d", sale.ErrInvalid, syntax.Offset)
	case errors.As(err, &typ):
		if typ.Field != "" {
			return fmt.Errorf("%w: field %q must be a %s that fits", sale.ErrInvalid, typ.Field, typ.Type)
		}
		return fmt.Errorf("%w: the body must be a JSON object", sale.ErrInvalid)
	default:
		// Unknown fields and the like: the library's message names the field.
		return fmt.Errorf("%w: %v", sale.ErrInvalid, err)
	}
}

// defaultPage is the page of a list that names no ?limit= (the service bounds it: sale.MaxPage).
const defaultPage = 50

// page answers a page of a list read back from its newest (?before=): each of xs as of has it,
// and next, the key (of key) of its last, to ask for the page before it, when the page is full
// (there may be more; 0, left out of the answer, when there are no more).
func page[T, R any](xs []T, limit int, of func(T) R, key func(T) int64) (out []R, next int64) {
	out = make([]R, len(xs))
	for i, x := range xs {
		out[i] = of(x)
	}
	if len(xs) == limit {
		next = key(xs[len(xs)-1])
	}
	return out, next
}

// queryInt is a query parameter's integer: def when it is left out, -1 when it is not one (a
// limit the service refuses, with its message).
func queryInt(v string, def int) int {
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return -1
	}
	return n
}

// queryInt64 is a paging parameter (before=ID): 0 when it is left out, -1 when it is not a
// number (which the service refuses).
func queryInt64(v string) int64 {
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return -1
	}
	return n
}
