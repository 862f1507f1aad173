package saletest

import (
	"context"
	"errors"
	"testing"
	"time"

	"seckill/internal/sale"
)

// Archive checks on env that activities are archived once nothing can change them, and only
// then: an item, a red packet and a queue line are kept while a pay window is open, while an
// order is still CREATED and until keep has passed (a sharded item too); then their hot state is dropped, and every
// read answers from the database without bringing it back.
func Archive(t *testing.T, env Env) {
	ctx := context.Background()
	svc, clock := env.Service, env.Clock
	const keep = time.Hour
	start := clock.Now()
	// create makes a with its times moved to start (plus offset for its start).
	create := func(a sale.Activity, offset time.Duration) sale.Activity {
		t.Helper()
		a.ID, a.Name, a.StartAt, a.EndAt = "", "archive", start.Add(offset), start.Add(time.Hour)
		a, err := svc.CreateActivity(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	item := create(GateItem("", 3, 1), 0)
	hot := GateItem("", 4, 1)
	hot.StockShards = 2 // on Redis, a second slot's keys to drop
	sharded := create(hot, 0)
	rp := GateItem("", 3, 1)
	rp.Kind, rp.PriceCents, rp.TotalCents = sale.KindRedPacket, 0, 300
	packet := create(rp, 0)
	line := create(LineItem("", 2, sale.AdmitQueue), time.Minute) // the join below comes early

	grab := func(a sale.Activity, user string) sale.Grab {
		t.Helper()
		g, err := svc.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: user})
		if err != nil {
			t.Fatalf("grab %s by %s: %v", a.ID, user, err)
		}
		return g
	}
	paid, unpaid, share := grab(item, "u1"), grab(item, "u2"), grab(packet, "r1")
	env.Drain(item.ID)
	env.Drain(packet.ID)
	for _, g := range []sale.Grab{paid, share} {
		if _, err := svc.Pay(ctx, g.UserID, g.Token); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := env.Lines.Join(ctx, line.ID, "q1", "", ""); err != nil {
		t.Fatalf("join the line: %v", err)
	}
	acts := []sale.Activity{item, sharded, packet, line}
	for _, a := range acts {
		if hot := env.Hot(a.ID); len(hot) == 0 {
			t.Fatalf("%s holds no hot state before its archive", a.ID)
		}
	}

	archive := func(when string, want int) {
		t.Helper()
		n, err := svc.ArchiveDue(ctx, keep)
		if err != nil || n != want {
			t.Fatalf("%s: archived %d, %v; want %d", when, n, err, want)
		}
	}
	archive("during the sale", 0)
	clock.Advance(time.Hour + 2*time.Minute) // over, and the pay windows closed...
	archive("before keep has passed", 0)
	clock.Advance(keep)
	archive("with an unpaid order still CREATED", 3) // ...but u2's order waits for the sweeper
	if _, err := svc.SweepExpired(ctx, 100); err != nil {
		t.Fatal(err)
	}
	archive("once the sweeper closed it", 1)
	archive("again", 0)

	for _, a := range acts {
		if hot := env.Hot(a.ID); len(hot) > 0 {
			t.Fatalf("%s archived, and still held in %v", a.ID, hot)
		}
	}
	// Reads answer from the database.
	if n, err := svc.Remaining(ctx, item.ID); err != nil || n != 2 {
		t.Fatalf("remaining of the archived item: %d, %v; want 2 (u1's unit paid, u2's restocked)", n, err)
	}
	st, err := svc.Stats(ctx, item.ID)
	if err != nil || st.Remaining != 2 || st.Paid != 1 || st.Cancelled != 1 || st.Orders != 2 {
		t.Fatalf("stats of the archived item: %+v, %v", st, err)
	}
	if o, err := svc.Order(ctx, "u1", paid.Token); err != nil || o.Status != sale.StatusPaid {
		t.Fatalf("u1's order: %+v, %v", o, err)
	}
	if o, err := svc.Order(ctx, "u2", unpaid.Token); err != nil || o.Status != sale.StatusCancelled {
		t.Fatalf("u2's order: %+v, %v", o, err)
	}
	b, err := env.Boards.Leaderboard(ctx, packet.ID, 10)
	if err != nil || b.Strategy != sale.RankDatabase || len(b.Entries) != 1 || b.Entries[0].UserID != "r1" {
		t.Fatalf("leaderboard of the archived red packet: %+v, %v; want r1's share, from the database", b, err)
	}
	if rec, err := svc.Reconcile(ctx, item.ID); err != nil || rec.Outcome != sale.ReconcileArchived || !rec.OK {
		t.Fatalf("reconcile of the archived item: %+v, %v", rec, err)
	}
	if _, err := svc.Grab(ctx, sale.GrabRequest{ActivityID: item.ID, UserID: "late"}); !errors.Is(err, sale.ErrEnded) {
		t.Fatalf("a grab of the archived item: %v, want ErrEnded", err)
	}
	for _, a := range acts {
		if hot := env.Hot(a.ID); len(hot) > 0 {
			t.Fatalf("reading %s brought its hot state back: %v", a.ID, hot)
		}
		got, err := env.Store.Activity(ctx, a.ID)
		if err != nil || !got.Archived() || !got.ArchivedAt.Equal(clock.Now().Truncate(time.Millisecond)) {
			t.Fatalf("%s in the database: archived at %v, %v; want %v", a.ID, got.ArchivedAt, err, clock.Now())
		}
	}
	// A node that starts two hours after the archive (a deploy: the archiver drops again only
	// what was archived in the last hour) warms the gate from the database without them.
	clock.Advance(2 * time.Hour)
	if err := svc.Warm(ctx, clock.Now().Add(-sale.MaxPayWindow)); err != nil {
		t.Fatalf("a restart's warm: %v", err)
	}
	archive("after a restart", 0)
	for _, a := range acts {
		if hot := env.Hot(a.ID); len(hot) > 0 {
			t.Fatalf("a restart's warm brought the archived %s back: %v", a.ID, hot)
		}
	}
	// A node that cached the activities before they ended lets them go once long over.
	clock.Advance(sale.MaxPayWindow + 8*24*time.Hour)
	if err := svc.ReloadActivities(ctx); err != nil {
		t.Fatal(err)
	}
	for _, a := range acts {
		if _, ok := svc.Known(a.ID); ok {
			t.Fatalf("%s is still cached a fortnight after its archive", a.ID)
		}
	}
}
