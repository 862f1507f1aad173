package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

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

// CreateActivityRequest is the body of POST /api/admin/activities.
type CreateActivityRequest struct {
	Name             string `json:"name"`
	Kind             string `json:"kind"`
	Stock            *int64 `json:"stock"`
	PriceCents       int64  `json:"price_cents"`
	PerUserLimit     *int64 `json:"per_user_limit"`
	StartAt          string `json:"start_at"`
	EndAt            string `json:"end_at"`
	PayWindowS       *int64 `json:"pay_window_s"`
	TotalCents       int64  `json:"total_cents"`
	Count            *int64 `json:"count"`
	RequireChallenge bool   `json:"require_challenge"`
	Admission        string `json:"admission"`
	// StockShards splits an item's stock over that many Redis Cluster slots (default 1).
	StockShards int64 `json:"stock_shards"`
	// QueueCap and AdmitRate set a queue or lottery line's cap of waiting tickets (default ten
	// times the stock) and its admissions a second (default 1000).
	QueueCap  int64 `json:"queue_cap"`
	AdmitRate int64 `json:"admit_rate"`
	// RateLimits override the node's grab rate limits for this activity, in requests per
	// second; 0 switches one off, and one left out keeps the node's.
	RateLimits *RateLimitsRequest `json:"rate_limits"`
}

// RateLimitsRequest is an activity's own grab rate limits in requests per second: 0 switches one
// off, and one left out is left as it is (the node's, on a new activity).
type RateLimitsRequest struct {
	PerUser *int64 `json:"per_user"`
	PerIP   *int64 `json:"per_ip"`
	Global  *int64 `json:"global"`
}

// rates reads the limits given, in the domain's terms (0 is sale.RateOff), per user, per IP and
// global; nil for one left out.
func (rl *RateLimitsRequest) rates() ([3]*int64, error) {
	var out [3]*int64
	for i, r := range []struct {
		name string
		in   *int64
	}{{"per_user", rl.PerUser}, {"per_ip", rl.PerIP}, {"global", rl.Global}} {
		switch {
		case r.in == nil:
		case *r.in < 0 || *r.in > sale.MaxRate:
			return out, fmt.Errorf("%w: rate_limits.%s must be between 0 (off) and %d requests per second", sale.ErrInvalid, r.name, sale.MaxRate)
		case *r.in == 0:
			off := int64(sale.RateOff)
			out[i] = &off
		default:
			out[i] = r.in
		}
	}
	return out, nil
}

// DefaultPayWindow applies when a create request names none.
const DefaultPayWindow = 900 * time.Second

// Activity turns the request into a domain activity; sale.Activity.Validate checks the rest.
func (c CreateActivityRequest) Activity() (sale.Activity, error) {
	bad := func(msg string) (sale.Activity, error) {
		return sale.Activity{}, fmt.Errorf("%w: %s", sale.ErrInvalid, msg)
	}
	a := sale.Activity{
		Name:        c.Name,
		Kind:        sale.Kind(c.Kind),
		PriceCents:  c.PriceCents,
		TotalCents:  c.TotalCents,
		PayWindow:   DefaultPayWindow,
		Admission:   sale.Admission(c.Admission),
		StockShards: c.StockShards,
		QueueCap:    c.QueueCap,
		AdmitRate:   c.AdmitRate,

		RequireChallenge: c.RequireChallenge,
	}
	if a.Kind == "" {
		a.Kind = sale.KindItem
	}
	switch {
	case a.Kind == sale.KindRedPacket && c.Count == nil:
		return bad("count is required for a red packet")
	case a.Kind == sale.KindRedPacket && c.Stock != nil && *c.Stock != *c.Count:
		return bad("stock and count differ; a red packet needs only count")
	case a.Kind == sale.KindRedPacket:
		a.Stock = *c.Count
	case c.Count != nil:
		return bad("count is for red packets; items have stock")
	case c.Stock == nil:
		return bad("stock is required")
	default:
		a.Stock = *c.Stock
	}
	if c.PerUserLimit != nil {
		if *c.PerUserLimit <= 0 {
			return bad("per_user_limit must be at least 1")
		}
		a.PerUserLimit = *c.PerUserLimit
	}
	if c.PayWindowS != nil {
		if *c.PayWindowS <= 0 || *c.PayWindowS > int64(sale.MaxPayWindow/time.Second) {
			return bad(fmt.Sprintf("pay_window_s must be between 1 and %d", int64(sale.MaxPayWindow/time.Second)))
		}
		a.PayWindow = time.Duration(*c.PayWindowS) * time.Second
	}
	if c.RateLimits != nil {
		rs, err := c.RateLimits.rates()
		if err != nil {
			return sale.Activity{}, err
		}
		for i, out := range []*int64{&a.Rates.PerUser, &a.Rates.PerIP, &a.Rates.Global} {
			if rs[i] != nil {
				*out = *rs[i]
			}
		}
	}
	var err error
	if c.StartAt == "" || c.EndAt == "" {
		return bad("start_at and end_at are required (RFC 3339)")
	}
	if a.StartAt, err = time.Parse(time.RFC3339, c.StartAt); err != nil {
		return bad("start_at must be an RFC 3339 time")
	}
	if a.EndAt, err = time.Parse(time.RFC3339, c.EndAt); err != nil {
		return bad("end_at must be an RFC 3339 time")
	}
	return a, nil
}

// EditActivityRequest is the body of PATCH /api/admin/activities/{id}: the terms to change,
// each one left out left as it is.
type EditActivityRequest struct {
	Name             *string            `json:"name"`
	PriceCents       *int64             `json:"price_cents"`
	Stock            *int64             `json:"stock"`
	PerUserLimit     *int64             `json:"per_user_limit"`
	StartAt          *time.Time         `json:"start_at"`
	EndAt            *time.Time         `json:"end_at"`
	PayWindowS       *int64             `json:"pay_window_s"`
	RequireChallenge *bool              `json:"require_challenge"`
	RateLimits       *RateLimitsRequest `json:"rate_limits"`
}

// Edit turns the request into the domain's edit; sale.Activity.Validate checks the result.
func (e EditActivityRequest) Edit() (sale.ActivityEdit, error) {
	out := sale.ActivityEdit{Name: e.Name, PriceCents: e.PriceCents, Stock: e.Stock, PerUserLimit: e.PerUserLimit,
		StartAt: e.StartAt, EndAt: e.EndAt, RequireChallenge: e.RequireChallenge}
	if e.PayWindowS != nil {
		if *e.PayWindowS <= 0 || *e.PayWindowS > int64(sale.MaxPayWindow/time.Second) {
			return out, fmt.Errorf("%w: pay_window_s must be between 1 and %d", sale.ErrInvalid, int64(sale.MaxPayWindow/time.Second))
		}
		w := time.Duration(*e.PayWindowS) * time.Second
		out.PayWindow = &w
	}
	if e.RateLimits != nil {
		rs, err := e.RateLimits.rates()
		if err != nil {
			return out, err
		}
		out.PerUserRate, out.PerIPRate, out.GlobalRate = rs[0], rs[1], rs[2]
	}
	if out == (sale.ActivityEdit{}) {
		return out, fmt.Errorf("%w: nothing to change", sale.ErrInvalid)
	}
	return out, nil
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

// LoginRequest is the body of POST /api/login.
type LoginRequest struct {
	User string `json:"user"`
}
