//go:build release

package main

import (
	"net/http"
	"time"
)

// A release build has no lab settings: its clock is the machine's (see labclock.go), and it
// dials each Redis server at its own address.
const labBuilt = false

// withLabClock is never called in a release build: its config refuses SECKILL_LAB_CLOCK=on.
func withLabClock(*func() time.Time, *http.ServeMux) {}
