package saletest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"seckill/internal/sale"
)

// OrderChanges makes the changes a relay's tests deliver: on store (opened to emit events), an
// activity "a" with n orders, the even ones paid and the odd ones cancelled by their buyers. It
// returns the orders' tokens; order i's events are created then paid (even i) or cancelled.
func OrderChanges(t testing.TB, store sale.Store, n int) []string {
	t.Helper()
	ctx := context.Background()
	a := sale.Activity{ID: "a", Name: "A", Kind: sale.KindItem, Stock: int64(n), PriceCents: 100, PerUserLimit: 1,
		StartAt: T0, EndAt: T0.Add(time.Hour), PayWindow: 10 * time.Minute, Admission: sale.AdmitDirect, StockShards: 1, CreatedAt: T0}
	if err := store.CreateActivity(ctx, a, nil); err != nil {
		t.Fatal(err)
	}
	var gs []sale.Grab
	for i := range n {
		gs = append(gs, sale.Grab{Token: fmt.Sprint("g", i), ActivityID: "a", UserID: fmt.Sprint("u", i), AmountCents: 100, At: T0})
	}
	if _, err := store.PlaceOrders(ctx, gs); err != nil {
		t.Fatal(err)
	}
	tokens := make([]string, n)
	for i, g := range gs {
		var err error
		if i%2 == 0 {
			_, err = store.Pay(ctx, g.Token, T0.Add(time.Minute))
		} else {
			_, _, err = store.Cancel(ctx, g.Token, "cancelled by the buyer", T0.Add(time.Minute))
		}
		if err != nil {
			t.Fatal(err)
		}
		tokens[i] = g.Token
	}
	return tokens
}

// OrderChangeTypes are the event types OrderChanges makes order i go through.
func OrderChangeTypes(i int) []string {
	if i%2 == 0 {
		return []string{string(sale.EventCreated), string(sale.EventPaid)}
	}
	return []string{string(sale.EventCreated), string(sale.EventCancelled)}
}

// EventPurge checks on env that the order events go, with their deliveries, once their sink took
// them keep ago, however many batches that takes, and only then: an event its sink has not taken
// stays, however old, until it is taken and kept in its turn.
func EventPurge(t *testing.T, env Env) {
	ctx := context.Background()
	svc, clock := env.Service, env.Clock
	const keep = time.Hour
	n := sale.PurgeBatch/2 + 10 // two events an order: more than a batch
	a := GateItem("", int64(n), 1)
	a.Name, a.StartAt, a.EndAt = "purge", clock.Now(), clock.Now().Add(time.Hour)
	a, err := svc.CreateActivity(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	var gs []sale.Grab
	for i := range n {
		g, err := svc.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: fmt.Sprint("p", i)})
		if err != nil {
			t.Fatalf("grab %d: %v", i, err)
		}
		gs = append(gs, g)
	}
	env.Drain(a.ID)
	for i, g := range gs {
		if i%2 == 0 {
			_, err = svc.Pay(ctx, g.UserID, g.Token)
		} else {
			_, err = svc.Cancel(ctx, g.UserID, g.Token)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// deliver has the sink take every event due, but those of the order skip, as a relay would.
	deliver := func(skip string) {
		t.Helper()
		for {
			ds, err := env.Store.Deliverable(ctx, Sink, clock.Now(), 2*n)
			if err != nil {
				t.Fatal(err)
			}
			took := 0
			for _, d := range ds {
				if d.Order.Token == skip {
					continue
				}
				if err := env.Store.Delivered(ctx, Sink, d.ID, clock.Now()); err != nil {
					t.Fatal(err)
				}
				took++
			}
			if took == 0 {
				return
			}
		}
	}
	purge := func(when string, want int) {
		t.Helper()
		if got, err := env.Outbox.Purge(ctx, keep); err != nil || got != want {
			t.Fatalf("%s: purged %d, %v; want %d", when, got, err, want)
		}
	}
	left := func() []string {
		t.Helper()
		ds, err := env.Outbox.Deliveries(ctx, sale.DeliveryFilter{Sink: Sink, Limit: sale.MaxPage})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, d := range ds {
			if d.Order.ActivityID == a.ID {
				ids = append(ids, d.ID)
			}
		}
		return ids
	}
	held := gs[0].Token
	deliver(held)
	purge("just delivered", 0)
	clock.Advance(keep + time.Minute)
	purge("kept long enough", 2*n-2)
	want := []string{sale.EventID(held, sale.EventPaid), sale.EventID(held, sale.EventCreated)}
	if got := left(); !slices.Equal(got, want) {
		t.Fatalf("left after the purge: %v; want only %v, which the sink has not taken", got, want)
	}
	if _, err := env.Outbox.Replay(ctx, Sink, sale.EventID(gs[1].Token, sale.EventCreated)); !errors.Is(err, sale.ErrNotFound) {
		t.Fatalf("replay of a purged event: %v, want ErrNotFound", err)
	}
	clock.Advance(30 * 24 * time.Hour)
	purge("a month on, not yet delivered", 0)
	deliver("")
	purge("delivered now", 0)
	clock.Advance(keep + time.Minute)
	purge("delivered and kept", 2)
	if got := left(); len(got) != 0 {
		t.Fatalf("left at the end: %v", got)
	}
}
