package main

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"seckill/internal/dbtest"
	"seckill/internal/redistest"

	"seckill/internal/e2etest"
)

// TestThreeNodesSellOneActivity runs three processes of the built binary on one Redis and one
// MariaDB. 20,000 users click twice each, the two clicks on two different nodes, for a stock of
// 500: exactly 500 users win, once each, and the database ends with exactly 500 orders.
func TestThreeNodesSellOneActivity(t *testing.T) {
	const users, stock = 20_000, 500
	env := testEnv(dbtest.MySQLDSN(t), "SECKILL_REDIS", redistest.Start(t, redistest.Options{}).URL())
	var clients []*client
	for range 3 {
		clients = append(clients, newClient(t, e2etest.StartChild(t, env).Base))
	}
	id := clients[0].CreateItem(stock, 1, 15*time.Minute)

	// Node k takes the first click of the users i with i%3 == k, and the second click of those
	// with i%3 == (k+2)%3.
	var mu sync.Mutex
	var outs []outcome
	var wg sync.WaitGroup
	for k, c := range clients {
		var mine []string
		for i := range users {
			if i%3 == k || i%3 == (k+2)%3 {
				mine = append(mine, fmt.Sprint("user-", i))
			}
		}
		wg.Go(func() {
			got := c.Crowd(id, mine, 0, 32, nil, nil)
			mu.Lock()
			outs = append(outs, got...)
			mu.Unlock()
		})
	}
	wg.Wait()

	winners := map[string]string{}
	for _, o := range outs {
		switch {
		case o.Err != nil:
			t.Fatalf("click by %s got no answer: %v", o.User, o.Err)
		case o.Status == http.StatusAccepted:
			if prev, ok := winners[o.User]; ok {
				t.Fatalf("%s won twice: %s and %s", o.User, prev, o.Token)
			}
			winners[o.User] = o.Token
		case o.Status != http.StatusConflict && o.Status != http.StatusGone:
			t.Fatalf("click by %s: %d %s", o.User, o.Status, o.Code)
		}
	}
	if len(outs) != 2*users || len(winners) != stock {
		t.Fatalf("%d clicks, %d winners; want %d clicks and %d winners", len(outs), len(winners), 2*users, stock)
	}
	for k, c := range clients { // every node drains and sees the same totals
		st := c.Drained(id)
		if st["orders"] != float64(stock) || st["created"] != float64(stock) || st["remaining"] != 0.0 {
			t.Fatalf("node %d stats after the sale: %v", k, st)
		}
	}
	n := 0
	for user, token := range winners {
		c := clients[n%3] // any node answers for any order
		n++
		if o := c.Must("GET", "/api/orders/"+token, c.Token(user), "", http.StatusOK); o["status"] != "CREATED" {
			t.Fatalf("%s's order %s is %v", user, token, o["status"])
		}
	}
}
