package saletest_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"seckill/internal/dbtest"
	"seckill/internal/redistest"
	"seckill/internal/sale"
	"seckill/internal/saletest"

	"seckill/internal/node/nodetest"
)

// TestPaymentCallbacksRaceTheSweeper races the provider's callbacks (some sent twice) against
// four sweepers over orders whose payment window is closing, on each database: SQLite and
// MariaDB under the embedded gate, PostgreSQL under Redis. A third of the callbacks come before
// the window's end (those orders must end PAID), a third race the sweepers over its last
// millisecond (either), and a third come after the sweepers closed the windows (REFUND_PENDING):
// so both outcomes happen on every run. Every order ends PAID with its payment kept, or
// REFUND_PENDING with its payment to give back and its unit on sale again: never both, never
// neither; the units given back sell again, exactly that many.
func TestPaymentCallbacksRaceTheSweeper(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { callbacksRaceTheSweeper(t, nodetest.Embedded) })
	t.Run("mariadb", func(t *testing.T) {
		callbacksRaceTheSweeper(t, func(t testing.TB, c *saletest.Clock) saletest.Env {
			return nodetest.EmbeddedOn(t, c, dbtest.MySQLDSN(t))
		})
	})
	t.Run("postgres", func(t *testing.T) {
		callbacksRaceTheSweeper(t, func(t testing.TB, c *saletest.Clock) saletest.Env {
			return nodetest.Distributed(t, c, redistest.Start(t, redistest.Options{}).URL(), dbtest.PostgresDSN(t))
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
		p, _, err := env.Payments.Start(ctx, user, tok, sale.Checkout{})
		if err != nil {
			t.Fatalf("start a payment: %v", err)
		}
		payments[tok] = p
	}
	// Each order's callback comes early, racing or late: the tokens in order, in turn.
	const early, racing, late = "early", "racing", "late"
	when := map[string]string{}
	for i, tok := range slices.Sorted(maps.Keys(payments)) {
		when[tok] = []string{early, racing, late}[i%3]
	}
	n := 0
	callbacks := func(wg *sync.WaitGroup, group string) {
		var stagger time.Duration
		for tok, p := range payments {
			if when[tok] != group {
				continue
			}
			calls := 1 + n%2 // every other callback comes twice, at once
			n++
			stagger += time.Millisecond // the racing ones spread over the sweepers' run
			wait := stagger
			for range calls {
				wg.Go(func() {
					if group == racing {
						time.Sleep(wait)
					}
					_, err := env.Payments.Settle(ctx, sale.PaymentNotice{Provider: saletest.ProviderName, PaymentID: p.ID, OrderToken: tok, AmountCents: p.AmountCents,
						Outcome: sale.OutcomeSucceeded})
					if err != nil {
						t.Errorf("callback of %s: %v", p.ID, err)
					}
				})
			}
		}
	}
	clock.Advance(30*time.Second - time.Millisecond) // the window's last millisecond
	var before sync.WaitGroup
	callbacks(&before, early)
	before.Wait()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			clock.Advance(time.Millisecond)
			if _, err := env.Service.SweepExpired(ctx, 7+i); err != nil {
				t.Errorf("sweep: %v", err)
			}
		})
	}
	callbacks(&wg, racing)
	wg.Wait()
	clock.Advance(time.Minute)
	sweepAll(t, env)
	var after sync.WaitGroup
	callbacks(&after, late)
	after.Wait()

	kept, refunds := 0, 0
	raced := map[string]int{}
	for tok, user := range users {
		o, err := env.Service.Order(ctx, user, tok)
		if err != nil {
			t.Fatal(err)
		}
		p, err := env.Payments.Payment(ctx, payments[tok].ID)
		if err != nil {
			t.Fatal(err)
		}
		outcome := ""
		switch {
		case o.Status == sale.StatusPaid && p.State == sale.PaymentSucceeded:
			kept++
			outcome = early
		case o.Status == sale.StatusRefundPending && p.State == sale.PaymentRefundPending:
			refunds++
			outcome = late
		default:
			t.Errorf("order %s is %s and its payment %s: want PAID and kept, or REFUND_PENDING and to give back", tok, o.Status, p.State)
			continue
		}
		switch when[tok] {
		case racing:
			raced[outcome]++
		case outcome:
		default:
			t.Errorf("order %s, paid %s: it is %s and its payment %s", tok, when[tok], o.Status, p.State)
		}
	}
	if kept+refunds != stock || kept < stock/3 || refunds < stock/3 {
		t.Fatalf("%d kept and %d refunds of %d payments; want a third of them at least of each", kept, refunds, stock)
	}
	t.Logf("%d payments kept, %d to give back; of those racing the sweepers, %d kept and %d to give back",
		kept, refunds, raced[early], raced[late])
	pending, err := env.Payments.List(ctx, sale.PaymentFilter{State: sale.PaymentRefundPending, Limit: stock})
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
		st, err := env.Payments.Settle(ctx, sale.PaymentNotice{Provider: saletest.ProviderName, PaymentID: p.ID, OrderToken: p.OrderToken, AmountCents: p.AmountCents,
			Outcome: sale.OutcomeRefunded})
		if err != nil || st.Order.Status != sale.StatusRefunded || st.Payment.State != sale.PaymentRefunded {
			t.Fatalf("refund of %s: order %s, payment %s, %v", p.ID, st.Order.Status, st.Payment.State, err)
		}
	}
	c, err := env.Operator.Counts(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Paid != int64(kept) || c.Refunded != int64(refunds) || c.Created != int64(resold) || c.RefundPending != 0 {
		t.Fatalf("counts %+v; want %d paid, %d refunded, %d created", c, kept, refunds, resold)
	}
}
