package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"seckill/internal/sale"
	"seckill/internal/signature"
)

// Error codes are part of the API: clients switch on them, so they never change.
const (
	CodeInvalid           = "INVALID_ARGUMENT"
	CodeUnauthorized      = "UNAUTHORIZED"
	CodeForbidden         = "FORBIDDEN"
	CodeNotStarted        = "NOT_STARTED"
	CodeEnded             = "ENDED"
	CodeChallengeRequired = "CHALLENGE_REQUIRED"
	CodeChallengeFailed   = "CHALLENGE_FAILED"
	CodeBlocked           = "BLOCKED"
	CodeNotFound          = "NOT_FOUND"
	CodeMethodNotAllowed  = "METHOD_NOT_ALLOWED"
	CodeAlreadyBought     = "ALREADY_BOUGHT"
	CodeInvalidState      = "INVALID_STATE"
	CodeExists            = "ALREADY_EXISTS"
	CodeSoldOut           = "SOLD_OUT"
	CodeTooLarge          = "TOO_LARGE"
	CodeRateLimited       = "RATE_LIMITED"
	CodeQueueFull         = "QUEUE_FULL"
	CodeBusy              = "BUSY"
	CodeInternal          = "INTERNAL"
	// A payment callback's refusals: its signature is missing or does not match the body
	// (forged or altered), its timestamp is over five minutes from the node's clock (a replay
	// of an old callback), or it names an amount other than the order's.
	CodeBadSignature     = "BAD_SIGNATURE"
	CodeSignatureExpired = "SIGNATURE_EXPIRED"
	CodeAmountMismatch   = "AMOUNT_MISMATCH"
)

// classes maps the domain's errors (and a callback's signature refused) to a status and a code, first match wins. It is the only place
// that decides an error's status.
var classes = []struct {
	err    error
	status int
	code   string
}{
	{sale.ErrSoldOut, http.StatusGone, CodeSoldOut}, // the crowd's answers first
	{sale.ErrAlreadyBought, http.StatusConflict, CodeAlreadyBought},
	{sale.ErrInvalid, http.StatusBadRequest, CodeInvalid},
	{sale.ErrUnauthorized, http.StatusUnauthorized, CodeUnauthorized},
	{sale.ErrForbidden, http.StatusForbidden, CodeForbidden},
	{sale.ErrNotStarted, http.StatusForbidden, CodeNotStarted},
	{sale.ErrEnded, http.StatusForbidden, CodeEnded},
	{sale.ErrChallengeRequired, http.StatusForbidden, CodeChallengeRequired},
	{sale.ErrChallengeFailed, http.StatusForbidden, CodeChallengeFailed},
	{sale.ErrBlocked, http.StatusForbidden, CodeBlocked},
	{sale.ErrNotFound, http.StatusNotFound, CodeNotFound},
	{sale.ErrInvalidState, http.StatusConflict, CodeInvalidState},
	{sale.ErrExists, http.StatusConflict, CodeExists},
	{sale.ErrTooLarge, http.StatusRequestEntityTooLarge, CodeTooLarge},
	{sale.ErrRateLimited, http.StatusTooManyRequests, CodeRateLimited},
	{sale.ErrQueueFull, http.StatusTooManyRequests, CodeQueueFull},
	{sale.ErrAmountMismatch, http.StatusUnprocessableEntity, CodeAmountMismatch},
	{signature.ErrNoSignature, http.StatusUnauthorized, CodeBadSignature},
	{signature.ErrBadSignature, http.StatusUnauthorized, CodeBadSignature},
	{signature.ErrStale, http.StatusUnauthorized, CodeSignatureExpired},
	{sale.ErrBusy, http.StatusServiceUnavailable, CodeBusy},
	// A gate's cache answers the service could not settle in time: the client retries.
	{sale.ErrStale, http.StatusServiceUnavailable, CodeBusy},
	{sale.ErrUnloaded, http.StatusServiceUnavailable, CodeBusy},
	{context.DeadlineExceeded, http.StatusServiceUnavailable, CodeBusy},
	// The client hung up while a dependency was being asked: it reads no answer, and the
	// dependency did nothing wrong (the guards do not count it), so not a 500 in the logs.
	{context.Canceled, http.StatusServiceUnavailable, CodeBusy},
}

// Classify returns the HTTP status and the stable code for err.
func Classify(err error) (status int, code string) {
	for _, c := range classes { // the crowd's answers come bare: a comparison each
		if err == c.err {
			return c.status, c.code
		}
	}
	for _, c := range classes {
		if errors.Is(err, c.err) {
			return c.status, c.code
		}
	}
	return http.StatusInternalServerError, CodeInternal
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// writeError answers with err's status and code. Unclassified errors are logged here, once, and
// the client sees only "internal error".
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, code := Classify(err)
	msg := err.Error()
	switch status {
	case http.StatusInternalServerError:
		s.log.ErrorContext(r.Context(), "request failed", "err", err, "method", r.Method, "path", r.URL.Path,
			"request_id", requestID(w))
		msg = "internal error"
	case http.StatusServiceUnavailable:
		s.log.WarnContext(r.Context(), "dependency unavailable", "err", err, "request_id", requestID(w))
		w.Header()["Retry-After"] = retryAfter
	case http.StatusTooManyRequests:
		if _, set := w.Header()["Retry-After"]; !set { // a limiter may have said when
			w.Header()["Retry-After"] = retryAfter
		}
	}
	if body := sentinelBody(err); body != nil {
		writeBody(w, status, body)
		return
	}
	writeJSON(w, status, errorBody{Error: errorDetail{Code: code, Message: msg}})
}

var retryAfter = []string{"1"}

// sentinelBodies holds the encoded answer to each bare domain error, in the order of classes:
// the crowd's 410s and 409s are served without encoding JSON each time.
var sentinelBodies = func() [][]byte {
	out := make([][]byte, len(classes))
	for i, c := range classes {
		b, err := json.Marshal(errorBody{Error: errorDetail{Code: c.code, Message: c.err.Error()}})
		if err != nil {
			panic(err)
		}
		out[i] = append(b, '\n')
	}
	return out
}()

// sentinelBody is the encoded answer to err if it is a bare domain error, else nil. It compares
// rather than hashes: an error of a type that cannot be hashed must not panic here.
func sentinelBody(err error) []byte {
	for i, c := range classes {
		if err == c.err {
			return sentinelBodies[i]
		}
	}
	return nil
}

// logLevelFor keeps 4xx answers out of the error log: they are the crowd, not faults.
func logLevelFor(status int) slog.Level {
	if status >= 500 {
		return slog.LevelWarn
	}
	return slog.LevelDebug
}

// busy is err as a BUSY answer (503): a dependency the check needs failed.
func busy(err error) error {
	if errors.Is(err, sale.ErrBusy) {
		return err
	}
	return fmt.Errorf("%w: %v", sale.ErrBusy, err)
}

// outcomeOf names an error for the metrics: its stable code, in lower case.
func outcomeOf(err error) string {
	_, code := Classify(err)
	return strings.ToLower(code)
}

// outcomeOr is outcome, or if it is empty the outcome of err.
func outcomeOr(outcome string, err error) string {
	if outcome != "" {
		return outcome
	}
	return outcomeOf(err)
}
