package saletest

import (
	"context"
	"fmt"
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
