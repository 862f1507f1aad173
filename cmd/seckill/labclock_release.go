//go:build release

package main

import (
	"net/http"
	"time"
)

// A release build has no lab clock: its clock is the machine's (see labclock.go).
const (
	labClockEnv   = "SECKILL_LAB_CLOCK"
	labClockBuilt = false
)

// withLabClock is never called in a release build: its config refuses SECKILL_LAB_CLOCK=on.
func withLabClock(*func() time.Time, *http.ServeMux) {}
