package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// benchGrab runs the grab handler end to end in process (JWT check, gate, SQLite group commit,
// JSON answer) with a distinct user per request, on an activity of the given stock, from 32
// goroutines per CPU: a crowd, so that the group commit has company.
func benchGrab(b *testing.B, stock int, want int) {
	f := newFixture(b, false)
	id := f.create(strings.Replace(validItem, `"stock":2`, `"stock":`+strconv.Itoa(stock), 1))
	const users = 1 << 18 // beyond this many requests users repeat and get 409
	tokens := make([]string, users)
	for i := range tokens {
		tok, err := f.tokens.Mint("user-"+strconv.Itoa(i), time.Now(), time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		tokens[i] = "Bearer " + tok
	}
	if stock < users { // flash: sell out first, then measure the crowd that comes too late
		for i := range stock {
			req := httptest.NewRequest("POST", "/api/activities/"+id+"/grab", nil)
			req.Header.Set("Authorization", tokens[users-1-i])
			f.h.ServeHTTP(httptest.NewRecorder(), req)
		}
	}
	path := "/api/activities/" + id + "/grab"
	span := int64(users) // the users not used to sell out
	if stock < users {
		span -= int64(stock)
	}
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1) % span
			req := httptest.NewRequest("POST", path, nil)
			req.Header.Set("Authorization", tokens[i])
			rec := httptest.NewRecorder()
			f.h.ServeHTTP(rec, req)
			if rec.Code != want && !(rec.Code == http.StatusConflict && n.Load() > span) { // users repeat past span
				b.Fatalf("grab: %d %s", rec.Code, rec.Body)
			}
		}
	})
}

func BenchmarkGrabHandlerSoldOut(b *testing.B) { benchGrab(b, 2000, http.StatusGone) }
func BenchmarkGrabHandlerAllWin(b *testing.B)  { benchGrab(b, 50_000_000, http.StatusAccepted) }
