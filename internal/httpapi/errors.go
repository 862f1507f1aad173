package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"seckill/internal/funnel"
	"seckill/internal/httpapi/wire"
	"seckill/internal/sale"
	"seckill/internal/signature"
)

// classes maps the domain's errors (and a callback's signature refused) to a status and a code, first match wins. It is the only place
// that decides an error's status.
var classes = []struct {
	err    error
	status int
	code   string
}{
	{sale.ErrSoldOut, http.StatusGone, wire.CodeSoldOut}, // the crowd's answers first
	{sale.ErrAlreadyBought, http.StatusConflict, wire.CodeAlreadyBought},
	{sale.ErrInvalid, http.StatusBadRequest, wire.CodeInvalid},
	{sale.ErrUnauthorized, http.StatusUnauthorized, wire.CodeUnauthorized},
	{sale.ErrForbidden, http.StatusForbidden, wire.CodeForbidden},
	{sale.ErrNotStarted, http.StatusForbidden, wire.CodeNotStarted},
	{sale.ErrEnded, http.StatusForbidden, wire.CodeEnded},
	{sale.ErrChallengeRequired, http.StatusForbidden, wire.CodeChallengeRequired},
	{sale.ErrChallengeFailed, http.StatusForbidden, wire.CodeChallengeFailed},
	{sale.ErrBlocked, http.StatusForbidden, wire.CodeBlocked},
	{sale.ErrNotFound, http.StatusNotFound, wire.CodeNotFound},
	{sale.ErrInvalidState, http.StatusConflict, wire.CodeInvalidState},
	{sale.ErrExists, http.StatusConflict, wire.CodeExists},
	{sale.ErrTooLarge, http.StatusRequestEntityTooLarge, wire.CodeTooLarge},
	{sale.ErrRateLimited, http.StatusTooManyRequests, wire.CodeRateLimited},
	{sale.ErrQueueFull, http.StatusTooManyRequests, wire.CodeQueueFull},
	{sale.ErrAmountMismatch, http.StatusUnprocessableEntity, wire.CodeAmountMismatch},
	{sale.ErrNotReserved, http.StatusForbidden, wire.CodeNotReserved},
	{sale.ErrNoReservation, http.StatusNotFound, wire.CodeNotReserved},
	{sale.ErrWaveNotOpen, http.StatusTooEarly, wire.CodeWaveNotOpen},
	{sale.ErrNotReservable, http.StatusConflict, wire.CodeNotReservable},
	{sale.ErrReservationsNotOpen, http.StatusConflict, wire.CodeReservationsNotOpen},
	{sale.ErrReservationsClosed, http.StatusConflict, wire.CodeReservationsClosed},
	{signature.ErrNoSignature, http.StatusUnauthorized, wire.CodeBadSignature},
	{signature.ErrBadSignature, http.StatusUnauthorized, wire.CodeBadSignature},
	{signature.ErrStale, http.StatusUnauthorized, wire.CodeSignatureExpired},
	{sale.ErrBusy, http.StatusServiceUnavailable, wire.CodeBusy},
	// A gate's cache answers the service could not settle in time: the client retries.
	{sale.ErrStale, http.StatusServiceUnavailable, wire.CodeBusy},
	{sale.ErrUnloaded, http.StatusServiceUnavailable, wire.CodeBusy},
	{context.DeadlineExceeded, http.StatusServiceUnavailable, wire.CodeBusy},
	// The client hung up while a dependency was being asked: it reads no answer, and the
	// dependency did nothing wrong (the guards do not count it), so not a 500 in the logs.
	{context.Canceled, http.StatusServiceUnavailable, wire.CodeBusy},
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
	return http.StatusInternalServerError, wire.CodeInternal
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
	case http.StatusTooManyRequests, http.StatusTooEarly:
		if _, set := w.Header()["Retry-After"]; !set { // a limiter may have said when
			w.Header()["Retry-After"] = retryAfter
		}
	}
	if body := sentinelBody(err); body != nil {
		writeBody(w, status, body)
		return
	}
	writeJSON(w, status, wire.ErrorBody{Error: wire.Error{Code: code, Message: msg}})
}

var retryAfter = []string{"1"}

// sentinelBodies holds the encoded answer to each bare domain error, in the order of classes:
// the crowd's 410s and 409s are served without encoding JSON each time.
var sentinelBodies = func() [][]byte {
	out := make([][]byte, len(classes))
	for i, c := range classes {
		b, err := json.Marshal(wire.ErrorBody{Error: wire.Error{Code: c.code, Message: c.err.Error()}})
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

// stageOf places a grab's outcome (as the metrics name it) in the dashboard's funnel.
func stageOf(outcome string) funnel.Stage {
	switch {
	case outcome == "won":
		return funnel.Won
	case strings.HasPrefix(outcome, "rate_limited"):
		return funnel.RateLimited
	case strings.HasPrefix(outcome, "blocked"), outcome == "risk_block":
		return funnel.Blocked
	case outcome == "risk_challenge", strings.HasPrefix(outcome, "challenge_"):
		return funnel.Challenged
	case strings.HasPrefix(outcome, "sold_out"):
		return funnel.SoldOut
	case outcome == "already_bought":
		return funnel.AlreadyBought
	case outcome == "busy":
		return funnel.Busy
	}
	return funnel.Other
}
