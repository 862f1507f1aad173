package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/httpapi"
	"seckill/internal/ratelimit"
	"seckill/internal/saletest"
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
		tok, err := f.tokens.Mint("user-"+strconv.Itoa(i), f.clock.Now(), time.Hour)
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

// BenchmarkTrivialHandler is the harness alone (httptest request and recorder, one header) around
// a handler that writes a constant JSON body: what the grab benchmarks' own cost is measured
// against.
func BenchmarkTrivialHandler(b *testing.B) {
	body := []byte(`{"status":"QUEUED"}`)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		w.Write(body)
	})
	b.ReportAllocs()
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest("POST", "/api/activities/x/grab", nil)
			req.Header.Set("Authorization", "Bearer x")
			h.ServeHTTP(httptest.NewRecorder(), req)
		}
	})
}

// BenchmarkGrabHandlerRateLimited: one user hammering; after its first grab every request is
// refused by its token bucket (429), the path a bot costs.
func BenchmarkGrabHandlerRateLimited(b *testing.B) {
	f := newFixtureWith(b, func(c *httpapi.Config, _ *saletest.Clock) {
		c.Limits = httpapi.Limits{PerUser: ratelimit.Rule{PerSecond: 5, Burst: 5}}
	})
	id := f.create(strings.Replace(validItem, `"stock":2`, `"stock":1000`, 1))
	bearer := "Bearer " + f.user("hammer")
	path := "/api/activities/" + id + "/grab"
	b.ReportAllocs()
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest("POST", path, nil)
			req.Header.Set("Authorization", bearer)
			rec := httptest.NewRecorder()
			f.h.ServeHTTP(rec, req)
			if rec.Code != http.StatusTooManyRequests && rec.Code != http.StatusConflict && rec.Code != http.StatusAccepted {
				b.Fatalf("grab: %d %s", rec.Code, rec.Body)
			}
		}
	})
}
