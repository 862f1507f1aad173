package saletest

import (
	"context"
	"testing"
	"time"

	"seckill/internal/sale"
)

// LeaseTests runs the rules every sale.Lease keeps on leases from newLease, on the real clock
// (a Redis lease expires by Redis's): one holder at a time, extended only by its holder, free
// again once its time is out.
func LeaseTests(t *testing.T, newLease func(t *testing.T) sale.Lease) {
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	l := newLease(t)
	hold := func(name, holder string) bool {
		t.Helper()
		ok, err := l.Hold(ctx, name, holder, ttl)
		if err != nil {
			t.Fatalf("Hold(%s, %s): %v", name, holder, err)
		}
		return ok
	}
	if !hold("job", "a") {
		t.Fatal("a free lease was refused")
	}
	if hold("job", "b") {
		t.Fatal("a lease held by a was given to b")
	}
	if !hold("other", "b") {
		t.Fatal("a lease of another name was refused: names are independent")
	}
	// a extends its lease past the first ttl: b is still refused after it.
	time.Sleep(ttl / 2)
	if !hold("job", "a") {
		t.Fatal("the holder could not extend its lease")
	}
	time.Sleep(ttl/2 + ttl/6)
	if hold("job", "b") {
		t.Fatal("b took the lease that a had extended")
	}
	time.Sleep(ttl + ttl/3)
	if !hold("job", "b") {
		t.Fatal("b was refused a lease whose time was out")
	}
	if hold("job", "a") {
		t.Fatal("a took back the lease b holds now")
	}
}
