package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"seckill/internal/e2etest"
	"seckill/internal/httpapi/wire"
)

// TestLabClockSkewsTheNode: a node of this (development) build started with SECKILL_LAB_CLOCK=on
// takes PUT /lab/clock on its metrics listener, never its API's, and runs on the skewed clock
// from then on (its /api/time says so), until it is set back; a skew beyond a minute, or a body
// that is none, is refused as the API refuses (400 INVALID_ARGUMENT) and changes nothing. Without the setting there is no such route.
func TestLabClockSkewsTheNode(t *testing.T) {
	skewed := e2etest.StartChild(t, testEnv(sqliteDSN(t), "SECKILL_LAB_CLOCK", "on"))
	metrics := strings.TrimSuffix(skewed.Metrics, "/metrics")
	var code string // the last refusal's
	put := func(base, body string) int {
		req, err := http.NewRequest(http.MethodPut, base+"/lab/clock", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e wire.ErrorBody
		json.NewDecoder(resp.Body).Decode(&e)
		code = e.Error.Code
		return resp.StatusCode
	}
	offset := func() time.Duration { // the node's clock less this process's, give or take the call
		resp, err := http.Get(skewed.Base + "/api/time")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			NowMS int64 `json:"now_ms"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		return time.UnixMilli(body.NowMS).Sub(time.Now())
	}
	if d := offset(); d.Abs() > 5*time.Second {
		t.Fatalf("the node's clock is %v off before any skew", d)
	}
	if st := put(metrics, `{"skew_ms": 30000}`); st != http.StatusNoContent {
		t.Fatalf("PUT /lab/clock: %d", st)
	}
	if d := offset(); d < 25*time.Second || d > 35*time.Second {
		t.Fatalf("skewed 30 s ahead, the node's clock is %v off", d)
	}
	for _, body := range []string{`{"skew_ms": 61000}`, `{"skew_ms": -61000}`, `not json`} {
		if st := put(metrics, body); st != http.StatusBadRequest || code != wire.CodeInvalid {
			t.Errorf("PUT /lab/clock %s: %d %q, want 400 %s", body, st, code, wire.CodeInvalid)
		}
	}
	if d := offset(); d < 25*time.Second || d > 35*time.Second {
		t.Fatalf("after refused skews the node's clock is %v off, want the 30 s it was given", d)
	}
	if st := put(skewed.Base, `{"skew_ms": 0}`); st == http.StatusNoContent {
		t.Fatal("the API's listener took PUT /lab/clock")
	}
	if st := put(metrics, `{"skew_ms": 0}`); st != http.StatusNoContent {
		t.Fatalf("PUT /lab/clock back: %d", st)
	}
	if d := offset(); d.Abs() > 5*time.Second {
		t.Fatalf("set back, the node's clock is %v off", d)
	}
	plain := e2etest.StartChild(t, testEnv(sqliteDSN(t)))
	if st := put(strings.TrimSuffix(plain.Metrics, "/metrics"), `{"skew_ms": 1000}`); st == http.StatusNoContent {
		t.Fatal("a node without SECKILL_LAB_CLOCK took PUT /lab/clock")
	}
}
