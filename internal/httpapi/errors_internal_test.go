package httpapi

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"seckill/internal/httpapi/wire"
)

// listError cannot be hashed: a map keyed by error would panic on it.
type listError []string

func (l listError) Error() string { return strings.Join(l, "; ") }

// TestUnhashableErrorsAreClassified: an error of any type, even one a map cannot hold, gets its
// status and body without a panic.
func TestUnhashableErrorsAreClassified(t *testing.T) {
	err := listError{"a", "b"}
	if status, code := Classify(err); status != http.StatusInternalServerError || code != wire.CodeInternal {
		t.Fatalf("Classify = %d %s", status, code)
	}
	s := &Server{log: slog.New(slog.DiscardHandler)}
	rec := httptest.NewRecorder()
	s.writeError(rec, httptest.NewRequest("GET", "/", nil), err)
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), wire.CodeInternal) {
		t.Fatalf("writeError = %d %s", rec.Code, rec.Body)
	}
}
