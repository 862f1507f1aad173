package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"seckill/internal/saletest"

	"seckill/internal/node/nodetest"
)

// TestDemoSeedsOnceAndSaysWhenItEnded: a second start on the same database seeds nothing, and a
// start after the demo's 30 days names the demo activities that are over.
func TestDemoSeedsOnceAndSaysWhenItEnded(t *testing.T) {
	clock := saletest.NewClock(time.Now().Truncate(time.Second))
	env := nodetest.Embedded(t, clock)
	ctx := context.Background()
	if ended, err := seedDemo(ctx, env.Service, clock.Now()); err != nil || len(ended) != 0 {
		t.Fatalf("first seed: ended %v, %v", ended, err)
	}
	first, err := env.Service.Activity(ctx, demoID)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(29 * 24 * time.Hour)
	ended, err := seedDemo(ctx, env.Service, clock.Now())
	if err != nil || len(ended) != 0 {
		t.Fatalf("a start within the 30 days: ended %v, %v", ended, err)
	}
	clock.Advance(2 * 24 * time.Hour)
	ended, err = seedDemo(ctx, env.Service, clock.Now())
	if want := []string{demoID, demoPacketID, demoQueueID}; err != nil || !slices.Equal(ended, want) {
		t.Fatalf("a start after the 30 days: ended %v, %v; want %v", ended, err, want)
	}
	if a, err := env.Service.Activity(ctx, demoID); err != nil || !a.EndAt.Equal(first.EndAt) {
		t.Fatalf("the demo after the later starts: %+v, %v; want the first seed's, ending %v", a, err, first.EndAt)
	}
}
