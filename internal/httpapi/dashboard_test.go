package httpapi_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill/internal/breaker"
	"seckill/internal/httpapi"
	"seckill/internal/httpapi/wire"
)

func TestActivityListShowsWhatHasNotEnded(t *testing.T) {
	f := newFixture(t, false) // the clock reads 12:00
	later := f.create(`{"name":"Later","kind":"item","stock":5,"price_cents":100,"start_at":"2001-11-30T15:00:00Z","end_at":"2001-11-30T16:00:00Z"}`)
	now := f.create(validItem) // 11:00-13:00
	f.create(`{"name":"Over","kind":"item","stock":5,"price_cents":100,"start_at":"2001-11-30T10:00:00Z","end_at":"2001-11-30T11:00:00Z"}`)
	packet := f.create(`{"name":"Packet","kind":"redpacket","count":3,"total_cents":300,"start_at":"2001-11-30T11:30:00Z","end_at":"2001-11-30T14:00:00Z"}`)

	r := f.do("GET", "/api/activities", "", "")
	if r.status != 200 || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("list: %d %v %s", r.status, r.header, r.raw)
	}
	var got []string
	for _, a := range r.body["activities"].([]any) {
		a := a.(map[string]any)
		got = append(got, a["id"].(string)+":"+a["status"].(string))
		if a["remaining"] != nil {
			t.Errorf("%s: the list gives remaining %v; it must not cost a gate call per activity", a["id"], a["remaining"])
		}
	}
	want := []string{now + ":active", packet + ":active", later + ":upcoming"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("list = %v, want %v (soonest start first, the ended one left out)", got, want)
	}
}

func TestStageOfEveryGrabOutcome(t *testing.T) {
	for outcome, want := range map[string]string{
		"won": "won", "sold_out": "sold_out", "sold_out_edge": "sold_out", "already_bought": "already_bought",
		"rate_limited_ip": "rate_limited", "rate_limited_user": "rate_limited", "rate_limited_activity": "rate_limited",
		"rate_limited_node": "rate_limited",
		"blocked_ip":        "blocked", "blocked_user": "blocked", "blocked": "blocked", "risk_block": "blocked",
		"risk_challenge": "challenged", "challenge_required": "challenged", "challenge_failed": "challenged",
		"busy": "busy", "not_started": "other", "unauthorized": "other", "invalid_argument": "other",
	} {
		if got := httpapi.StageOf(outcome).String(); got != want {
			t.Errorf("stage of %q = %s, want %s", outcome, got, want)
		}
	}
}

// readEvent reads the next "stats" event of an SSE stream.
func readEvent(t *testing.T, sc *bufio.Scanner) wire.LiveEvent {
	t.Helper()
	var name string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && name == "stats":
			var ev wire.LiveEvent
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev); err != nil {
				t.Fatalf("event data %q: %v", line, err)
			}
			return ev
		}
	}
	t.Fatalf("stream ended before a stats event: %v", sc.Err())
	return wire.LiveEvent{}
}

func TestLiveStream(t *testing.T) {
	f := newFixture(t, false)
	srv := httptest.NewServer(f.h)
	t.Cleanup(srv.Close)
	id := f.create(validItem) // stock 2
	for _, u := range []string{"alice", "alice", "bob", "carol"} {
		f.do("POST", "/api/activities/"+id+"/grab", f.user(u), "")
	}
	f.do("POST", "/api/activities/nope/grab", f.user("dave"), "") // an unknown activity: not followed
	f.clock.Advance(time.Second)                                  // the view shows whole seconds

	open := func(id, token string) *http.Response {
		req, _ := http.NewRequest("GET", srv.URL+"/api/admin/activities/"+id+"/events", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, tc := range []struct {
		id, token string
		status    int
	}{{id, "", 401}, {id, "wrong", 401}, {"nope", adminToken, 404}} {
		resp := open(tc.id, tc.token)
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("stream of %s with token %q: %d %s, want %d JSON", tc.id, tc.token, resp.StatusCode,
				resp.Header.Get("Content-Type"), tc.status)
		}
	}

	resp := open(id, adminToken)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	ev := readEvent(t, sc)
	stats, _ := ev.Stats.(map[string]any)
	if stats["grabbed"] != 2.0 || stats["remaining"] != 0.0 || ev.Health != breaker.Normal || ev.StatsError != nil {
		t.Errorf("first event: stats %v, health %s, error %v; want 2 grabbed, 0 remaining, normal", stats, ev.Health, ev.StatsError)
	}
	tot := ev.Node.Totals
	if tot["won"] != 2 || tot["sold_out"] != 1 || tot["already_bought"] != 1 || tot["other"] != 0 {
		t.Errorf("funnel = %v; want 2 won, 1 sold out, 1 already bought", tot)
	}
	if last := ev.Node.Seconds[len(ev.Node.Seconds)-1]; last.Requests != 4 || last.Won != 2 || last.P99 <= 0 {
		t.Errorf("last second = %+v; want 4 requests, 2 won, a p99", last)
	}

	// Events keep coming, once per tick, with the clock's reading.
	f.clock.Advance(time.Second)
	if next := readEvent(t, sc); next.AtMS <= ev.AtMS {
		t.Errorf("second event at %d, first at %d", next.AtMS, ev.AtMS)
	}

	// Shutting down ends the stream (Shutdown would otherwise wait for it).
	f.srv.StopStreams()
	done := make(chan struct{})
	go func() {
		for sc.Scan() {
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream is still open after StopStreams")
	}
}

func TestLiveStreamsAreBounded(t *testing.T) {
	f := newFixture(t, false)
	srv := httptest.NewServer(f.h)
	t.Cleanup(srv.Close)
	id := f.create(validItem)
	get := func() *http.Response {
		req, _ := http.NewRequest("GET", srv.URL+"/api/admin/activities/"+id+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	var mu sync.Mutex
	var open []*http.Response
	t.Cleanup(func() {
		for _, r := range open {
			r.Body.Close()
		}
	})
	for range httpapi.MaxStreams {
		r := get()
		if r.StatusCode != 200 {
			t.Fatalf("stream %d: %d", len(open)+1, r.StatusCode)
		}
		bufio.NewReader(r.Body).ReadString('\n') // the handler is running once it has written
		mu.Lock()
		open = append(open, r)
		mu.Unlock()
	}
	over := get()
	over.Body.Close()
	if over.StatusCode != 503 || over.Header.Get("Retry-After") == "" {
		t.Fatalf("stream %d: %d, want 503 with Retry-After", httpapi.MaxStreams+1, over.StatusCode)
	}
	open[0].Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := get()
		r.Body.Close()
		if r.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a closed stream's place was not freed: %d", r.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
