package wire

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
	// A reservation sale's refusals: a grab of a buyer who did not reserve, or before their
	// wave opens (425, Retry-After: the seconds to the opening); a reservation of an activity of
	// another admission, before the reservations open or after they closed at the start.
	CodeNotReserved         = "NOT_RESERVED"
	CodeWaveNotOpen         = "WAVE_NOT_OPEN"
	CodeNotReservable       = "NOT_RESERVABLE"
	CodeReservationsNotOpen = "RESERVATIONS_NOT_OPEN"
	CodeReservationsClosed  = "RESERVATIONS_CLOSED"
)

// ErrorBody is the body of every answer of 4xx or 5xx: {"error": {"code": ..., "message": ...}}.
type ErrorBody struct {
	Error Error `json:"error"`
}

// Error is a refusal: Code is one of the codes above, for programs; Message is for people and may
// change.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}
