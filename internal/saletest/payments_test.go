package saletest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"seckill/internal/mysqltest"
	"seckill/internal/pgtest"
	"seckill/internal/redistest"
	"seckill/internal/sale"
	"seckill/internal/saletest"
)

// TestPaymentCallbacksRaceTheSweeper races the provider's callbacks (some sent twice) against
// four sweepers over orders whose payment window is closing, on each database: SQLite and
// MariaDB under the embedded gate, PostgreSQL under Redis. Every order ends PAID with its
// payment kept, or REFUND_PENDING with its payment to give back and its unit on sale again:
// never both, never neither; the units given back sell again, exactly that many.
func TestPaymentCallbacksRaceTheSweeper(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { callbacksRaceTheSweeper(t, saletest.Embedded) })
	t.Run("mariadb", func(t *testing.T) {
		callbacksRaceTheSweeper(t, func(t testing.TB, c *saletest.Clock) saletest.Env {
			return saletest.EmbeddedOn(t, c, mysqltest.DSN(t))
		})
	})
	t.Run("postgres", func(t *testing.T) {
		callbacksRaceTheSweeper(t, func(t testing.TB, c *saletest.Clock) saletest.Env {
			return saletest.Distributed(t, c, redistest.Start(t, redistest.Options{}).URL(), pgtest.DSN(t))
		})
	})
}

func callbacksRaceTheSweeper(t *testing.T, newEnv saletest.NewEnv) {
	ctx := context.Background()
	clock := saletest.NewClock(saletest.T0)
	env := newEnv(t, clock)
	const stock = 40
	a := createItem(t, env.Service, clock, "", stock, time.Minute)
	users := sellOut(t, env, a) // order token -> buyer
	clock.Advance(30 * time.Second)
	payments := map[string]sale.Payment{} // order token -> its payment
	for tok, user := range users {
		p, err := env.Service.StartPayment(ctx, user, tok)
		if err != nil {
			t.Fatalf("start a payment: %v", err)
		}
		payments[tok] = p
	}
	clock.Advance(30*time.Second - time.Millisecond) // the callbacks race the window's last millisecond
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			clock.Advance(time.Millisecond)
			if _, err := env.Service.SweepExpired(ctx, 7+i); err != nil {
				t.Errorf("sweep: %v", err)
			}
		})
	}
	n := 0
	for tok, p := range payments {
		calls := 1 + n%2 // every other callback comes twice, at once
		n++
		for range calls {
			wg.Go(func() {
				_, err := env.Service.Settle(ctx, sale.PaymentNotice{PaymentID: p.ID, OrderToken: tok, AmountCents: p.AmountCents,
					Outcome: sale.OutcomeSucceeded})
				if err != nil {
					t.Errorf("callback of %s: %v", p.ID, err)
				}
			})
		}
	}
	wg.Wait()
	clock.Advance(time.Minute)
	sweepAll(t, env)

	kept, refunds := 0, 0
	for tok, user := range users {
		o, err := env.Service.Order(ctx, user, tok)
		if err != nil {
			t.Fatal(err)
		}
		p, err := env.Service.Payment(ctx, payments[tok].ID)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case o.Status == sale.StatusPaid && p.State == sale.PaymentSucceeded:
			kept++
		case o.Status == sale.StatusRefundPending && p.State == sale.PaymentRefundPending:
			refunds++
		default:
			t.Errorf("order %s is %s and its payment %s: want PAID and kept, or REFUND_PENDING and to give back", tok, o.Status, p.State)
		}
	}
	if kept+refunds != stock || refunds == 0 && kept == 0 {
		t.Fatalf("%d kept and %d refunds of %d payments", kept, refunds, stock)
	}
	t.Logf("%d payments kept, %d to give back", kept, refunds)
	pending, err := env.Service.Payments(ctx, sale.PaymentFilter{State: sale.PaymentRefundPending, Limit: stock})
	if err != nil || len(pending) != refunds {
		t.Fatalf("refunds pending listed: %d, %v; want %d", len(pending), err, refunds)
	}

	// Every unit of a refunded order is on sale again: exactly that many sell to new buyers.
	if rem, err := env.Service.Remaining(ctx, a.ID); err != nil || rem != int64(refunds) {
		t.Fatalf("gate has %d remaining (%v); want %d, one per refund", rem, err, refunds)
	}
	resold := 0
	for u := range stock {
		_, err := env.Service.Grab(ctx, sale.GrabRequest{ActivityID: a.ID, UserID: fmt.Sprint("late", u)})
		switch {
		case err == nil:
			resold++
		case !errors.Is(err, sale.ErrSoldOut):
			t.Fatalf("resale: %v", err)
		}
	}
	if resold != refunds {
		t.Fatalf("resold %d units; want %d, one per refund", resold, refunds)
	}
	env.Drain(a.ID)
	if rec, err := env.Service.Reconcile(ctx, a.ID); err != nil || !rec.OK {
		t.Fatalf("reconcile = %+v, %v", rec, err)
	}

	// The operator gives the money back: the orders end REFUNDED.
	for _, p := range pending {
		st, err := env.Service.Settle(ctx, sale.PaymentNotice{PaymentID: p.ID, OrderToken: p.OrderToken, AmountCents: p.AmountCents,
			Outcome: sale.OutcomeRefunded})
		if err != nil || st.Order.Status != sale.StatusRefunded || st.Payment.State != sale.PaymentRefunded {
			t.Fatalf("refund of %s: order %s, payment %s, %v", p.ID, st.Order.Status, st.Payment.State, err)
		}
	}
	c, err := env.Service.Counts(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Paid != int64(kept) || c.Refunded != int64(refunds) || c.Created != int64(resold) || c.RefundPending != 0 {
		t.Fatalf("counts %+v; want %d paid, %d refunded, %d created", c, kept, refunds, resold)
	}
}
