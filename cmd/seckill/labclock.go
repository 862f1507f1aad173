//go:build !release

package main

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"time"

	"seckill/internal/httpapi/wire"
)

// A node of a development build started with SECKILL_LAB_CLOCK=on (bench sets it on the nodes it
// spawns) runs on a clock an operator can skew while it runs: PUT /lab/clock {"skew_ms": N} on
// its metrics listener, never the API's. It is the nemesis's clock-skew strike (issue 39): a
// node whose clock is off by a drawn offset within what the deployment promises to bear (docs/
// operating.md, "Clocks"). A release build has no such setting (labclock_release.go).

// labBuilt says this build has the lab's settings: this clock, and the Redis routes of
// SECKILL_LAB_REDIS_VIA.
const labBuilt = true

// maxLabSkew bounds the skew a node takes: the nemesis stays within the promise, a mistake
// beyond it is refused.
const maxLabSkew = time.Minute

// labClock is a clock offset from the machine's by skew.
type labClock struct{ skew atomic.Int64 }

func (c *labClock) now() time.Time { return time.Now().Add(time.Duration(c.skew.Load())) }

// LabClockRequest is the body of PUT /lab/clock.
type LabClockRequest struct {
	SkewMS int64 `json:"skew_ms"`
}

func (c *labClock) serveHTTP(w http.ResponseWriter, r *http.Request) {
	var req LabClockRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<10)).Decode(&req); err != nil {
		refuse(w, `want {"skew_ms": N}`)
		return
	}
	skew := time.Duration(req.SkewMS) * time.Millisecond
	if skew > maxLabSkew || skew < -maxLabSkew {
		refuse(w, "skew_ms beyond a minute either way")
		return
	}
	c.skew.Store(int64(skew))
	w.WriteHeader(http.StatusNoContent)
}

// refuse answers a bad request as the API does: 400, INVALID_ARGUMENT, in the JSON error body.
func refuse(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(wire.ErrorBody{Error: wire.Error{Code: wire.CodeInvalid, Message: msg}})
}

// withLabClock gives the node a skewable clock, and the route that skews it on mux (the metrics
// listener's).
func withLabClock(now *func() time.Time, mux *http.ServeMux) {
	c := &labClock{}
	*now = c.now
	mux.HandleFunc("PUT /lab/clock", c.serveHTTP)
}
