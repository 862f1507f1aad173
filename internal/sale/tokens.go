package sale

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
	"time"
)

// ValidID reports whether s can name an activity: 1 to MaxIDLen ASCII letters, digits, '-' or '_'.
func ValidID(s string) bool {
	if len(s) == 0 || len(s) > MaxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

var token32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewToken returns a fresh unguessable identifier starting with prefix (a letter, so that a
// token is never mistaken for a numeric order id).
func NewToken(prefix string) string {
	var b [15]byte
	rand.Read(b[:]) // never fails: crypto/rand panics rather than return an error
	return prefix + token32.EncodeToString(b[:])
}

// sorted32 is base32 whose digits sort in byte order as their values do.
var sorted32 = base32.NewEncoding("234567abcdefghijklmnopqrstuvwxyz").WithPadding(base32.NoPadding)

// NewGrabToken returns a fresh grab token: "g", then the time of the grab in milliseconds (now:
// the clock its sale window was checked on, see GrabTokenTime) and 72 random bits, so that tokens
// made later sort later. The databases index grabs and orders by token; keys that
// arrive in order add to one end of the index instead of a page anywhere per grab, which is what
// a commit must write.
func NewGrabToken(now time.Time) string {
	var b [15]byte
	ms := uint64(now.UnixMilli())
	for i := range 6 {
		b[i] = byte(ms >> (8 * (5 - i)))
	}
	rand.Read(b[6:])
	return "g" + sorted32.EncodeToString(b[:])
}

// GrabTokenTime returns the time a grab token of NewGrabToken was made at, to the millisecond;
// false for anything else.
func GrabTokenTime(token string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(token, "g")
	if !ok || len(rest) != sorted32.EncodedLen(15) {
		return time.Time{}, false
	}
	b, err := sorted32.DecodeString(rest)
	if err != nil || len(b) != 15 {
		return time.Time{}, false
	}
	var ms uint64
	for _, c := range b[:6] {
		ms = ms<<8 | uint64(c)
	}
	return time.UnixMilli(int64(ms)), true
}
