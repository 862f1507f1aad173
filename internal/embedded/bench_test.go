package embedded

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/breaker"
	"seckill/internal/sale"
)

// nullJournal accepts every batch at once: the benchmarks measure the gate and its group commit,
// not a disk.
type nullJournal struct{ fakeJournal }

func (*nullJournal) AppendGrabs(context.Context, []sale.Grab) error { return nil }

func benchGate(b *testing.B, stock int64) *Gate {
	g := NewGate(&nullJournal{}, 512, nil)
	b.Cleanup(func() { g.Close() })
	if err := g.Load(context.Background(), item("a", stock, 1), sale.GateState{}); err != nil {
		b.Fatal(err)
	}
	return g
}

// BenchmarkGateGrab: every grab wins (a new user each time, stock never runs out).
func BenchmarkGateGrab(b *testing.B) {
	g := benchGate(b, sale.MaxStock)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := g.Grab(ctx, named("a"), sale.GrabRequest{ActivityID: "a", UserID: strconv.Itoa(i), Now: t0}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGateGrabParallel: winners from every P at once, sharing one activity's lock and one
// group committer.
func BenchmarkGateGrabParallel(b *testing.B) {
	winAll(b, benchGate(b, sale.MaxStock))
}

// winAll grabs activity "a" of g from every P, a new user each time; every grab must win.
func winAll(b *testing.B, g sale.Gate) {
	ctx := context.Background()
	var n atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.Grab(ctx, named("a"), sale.GrabRequest{ActivityID: "a", UserID: strconv.FormatInt(n.Add(1), 10), Now: t0}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkGuardedGateGrabParallel is BenchmarkGateGrabParallel through the guard the embedded
// backend puts in front of the gate, with its one-second deadline: "prompt" as it runs (the gate
// is breaker.Prompt, so each grab runs in its caller's goroutine), "abandonable" with the gate
// hidden behind a type that is not, so that each grab runs on a goroutine of its own.
func BenchmarkGuardedGateGrabParallel(b *testing.B) {
	for _, mode := range []string{"prompt", "abandonable"} {
		b.Run(mode, func(b *testing.B) {
			var gate sale.Gate = benchGate(b, sale.MaxStock)
			if mode == "abandonable" {
				gate = struct{ sale.Gate }{gate}
			}
			winAll(b, breaker.GuardGate(gate, breaker.NewGuard("journal", breaker.GateThresholds, time.Now)))
		})
	}
}

// BenchmarkGateSoldOutParallel: the crowd after the last unit, turned away by the sold-out flag.
func BenchmarkGateSoldOutParallel(b *testing.B) {
	g := benchGate(b, 1)
	ctx := context.Background()
	if _, err := g.Grab(ctx, named("a"), sale.GrabRequest{ActivityID: "a", UserID: "first", Now: t0}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.Grab(ctx, named("a"), sale.GrabRequest{ActivityID: "a", UserID: "late", Now: t0}); err != sale.ErrSoldOut {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkGateGrabRedPacketParallel is BenchmarkGateGrabParallel on a red packet of ten million
// shares: each grab pops a share instead of decrementing a count. Run it with -benchtime of at
// most 10000000x, so that every grab wins.
func BenchmarkGateGrabRedPacketParallel(b *testing.B) {
	const shares = 10_000_000
	g := NewGate(&nullJournal{}, 512, nil)
	b.Cleanup(func() { g.Close() })
	a := item("rp", shares, 1)
	a.Kind, a.PriceCents, a.TotalCents = sale.KindRedPacket, 0, 100*shares
	st := sale.GateState{Shares: make([]sale.Share, shares)}
	for i := range st.Shares {
		st.Shares[i] = sale.Share{Index: int64(i), AmountCents: 100}
	}
	ctx := context.Background()
	if err := g.Load(ctx, a, st); err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.Grab(ctx, named("rp"), sale.GrabRequest{ActivityID: "rp", UserID: strconv.FormatInt(n.Add(1), 10), Now: t0}); err != nil {
				b.Fatal(err) // sold out too: keep -benchtime under the shares
			}
		}
	})
}
