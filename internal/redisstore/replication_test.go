package redisstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"seckill/internal/redistest"
	"seckill/internal/sale"
	"seckill/internal/saletest"
)

// TestMinReplicasWaitsForAReplica: with a replica required, a grab on a server that has none is
// refused ErrBusy after the wait (and taken nonetheless: the retry with its key gets it), and on
// a server with a replica it is acknowledged only once the replica holds it. The scripts are not
// loaded beforehand, as on a master just promoted: the first call loads them.
func TestMinReplicasWaitsForAReplica(t *testing.T) {
	ctx := context.Background()
	a := item("durable", 10, 1)
	repl := Replication{Replicas: 1, Timeout: 100 * time.Millisecond}

	lone := dial(t, redistest.Start(t, redistest.Options{}).URL())
	g := New(lone).WithReplication(repl)
	if err := g.Load(ctx, a, sale.GateState{}); err != nil {
		t.Fatal(err)
	}
	req := sale.GrabRequest{ActivityID: a.ID, UserID: "u1", IdempotencyKey: "k1", Now: a.StartAt}
	start := time.Now()
	if _, err := g.Grab(ctx, a, req); !errors.Is(err, sale.ErrBusy) || !errors.Is(err, errNotReplicated) {
		t.Fatalf("a grab with no replica to wait for: %v, want ErrBusy for want of replicas", err)
	}
	if took := time.Since(start); took < repl.Timeout {
		t.Fatalf("the grab was refused after %v, before its %v wait", took, repl.Timeout)
	}
	if n, _ := g.Remaining(ctx, a); n != 9 {
		t.Fatalf("remaining %d after the refused grab, want 9: the write stands on the master", n)
	}

	master := redistest.Start(t, redistest.Options{})
	replica := redistest.StartReplica(t, master)
	rdb := dial(t, master.URL())
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// The wait is long here: on a loaded 2-core machine a replica's acknowledgement can take more
	// than 100ms, and this half is about where the grab is, not how fast it gets there.
	g = New(rdb).WithReplication(Replication{Replicas: 1, Timeout: 5 * time.Second})
	if err := g.Load(ctx, a, sale.GateState{}); err != nil {
		t.Fatal(err)
	}
	gr, err := g.Grab(ctx, a, req)
	if err != nil {
		t.Fatalf("a grab with a replica: %v", err)
	}
	onReplica := dial(t, replica.URL())
	if rec, err := onReplica.HGet(ctx, keysOf(a.ID).grabs, gr.Token).Result(); err != nil || rec == "" {
		t.Fatalf("the acknowledged grab on the replica: %q, %v", rec, err)
	}
	again, err := g.Grab(ctx, a, req)
	if err != nil || again.Token != gr.Token {
		t.Fatalf("the retry with the same key: %+v, %v; want the first answer %s", again, err, gr.Token)
	}
	if err := g.Release(ctx, a, gr); err != nil {
		t.Fatalf("release with a replica: %v", err)
	}
	if n, _ := onReplica.Get(ctx, keysOf(a.ID).stock).Int64(); n != 10 {
		t.Fatalf("the replica's stock after the release: %d, want 10", n)
	}
}

// TestQueueDeliversOnlyWhatTheReplicasHold: with a replica required, a grab whose write the
// replica does not have yet (it is stopped) is not delivered to the worker, which could otherwise
// make an order of a grab a failover is about to lose; once the replica is back the same grab is
// delivered, once, even though the first read had already moved it to the consumer's pending
// list.
func TestQueueDeliversOnlyWhatTheReplicasHold(t *testing.T) {
	ctx := context.Background()
	a := item("durable-queue", 10, 1)
	master := redistest.Start(t, redistest.Options{})
	replica := redistest.StartReplica(t, master)
	rdb := dial(t, master.URL())
	g := New(rdb) // the gate waits for nobody here: the write is on the master alone
	if err := g.Load(ctx, a, sale.GateState{}); err != nil {
		t.Fatal(err)
	}
	list := func(context.Context) ([]sale.Activity, error) { return []sale.Activity{a}, nil }
	q := NewQueue(rdb, "c", list, time.Millisecond, time.Minute).
		WithReplication(Replication{Replicas: 1, Timeout: 100 * time.Millisecond})

	replica.Pause(t)
	gr, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: "u1", Now: a.StartAt})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := q.Receive(ctx, 10)
	if !errors.Is(err, sale.ErrBusy) || !errors.Is(err, errNotReplicated) || len(ds) != 0 {
		t.Fatalf("a grab the stopped replica lacks: delivered %d, %v; want none, ErrBusy for want of replicas", len(ds), err)
	}

	replica.Resume(t)
	var got []sale.Delivery
	for deadline := time.Now().Add(10 * time.Second); len(got) == 0; {
		ds, err := q.Receive(ctx, 10)
		if err == nil {
			got = ds
		} else if time.Now().After(deadline) {
			t.Fatalf("the grab after the replica came back: %v", err)
		}
	}
	if len(got) != 1 || got[0].Grab.Token != gr.Token {
		t.Fatalf("delivered %+v, want the one grab %s", got, gr.Token)
	}
	if err := q.Ack(ctx, got); err != nil {
		t.Fatal(err)
	}
	stream := StreamKey(a.ID)
	if p, err := rdb.XPending(ctx, stream, Group).Result(); err != nil || p.Count != 0 {
		t.Fatalf("pending after the ack: %+v, %v; want none", p, err)
	}
	if n, err := rdb.XLen(ctx, stream).Result(); err != nil || n != 0 {
		t.Fatalf("the stream after the ack holds %d, %v; want nothing", n, err)
	}
}

// TestLineAnswersWaitForAReplica: with a replica required, the drainer's writes that answer
// tickets (the draw's places, an admission's record, a skip) are refused ErrBusy while the
// replica is stopped, and are on the replica once acknowledged. A record a failover could take
// back would leave the drainer believing its winners answered while the next one finds them
// waiting, the gate empty, and answers them sold out.
func TestLineAnswersWaitForAReplica(t *testing.T) {
	ctx := context.Background()
	master := redistest.Start(t, redistest.Options{})
	replica := redistest.StartReplica(t, master)
	l := NewLine(dial(t, master.URL())).WithReplication(Replication{Replicas: 1, Timeout: 5 * time.Second})
	onReplica := NewLine(dial(t, replica.URL()))
	a := saletest.LineItem("durable-line", 2, sale.AdmitQueue)
	for i := range 4 {
		if _, err := l.Join(ctx, sale.JoinRequest{Activity: a, UserID: fmt.Sprintf("u%d", i),
			Token: sale.NewTicketToken(a.ID), Now: a.StartAt.Add(-time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, sale.ErrBusy) || !errors.Is(err, errNotReplicated) {
			t.Fatalf("%s with the replica stopped: %v, want ErrBusy for want of replicas", what, err)
		}
	}
	onTheReplica := func(what string, want func(sale.LineState) bool) {
		t.Helper()
		st, err := onReplica.State(ctx, a.ID)
		if err != nil || !want(st) {
			t.Fatalf("the replica's line after the %s: %+v, %v", what, st, err)
		}
	}
	short := Replication{Replicas: 1, Timeout: 100 * time.Millisecond}
	stopped := NewLine(l.rdb).WithReplication(short)

	replica.Pause(t)
	_, err := stopped.Seal(ctx, a)
	refused("draw", err)
	replica.Resume(t)
	if st, err := l.Seal(ctx, a); err != nil || !st.Drawn || st.Placed != 4 {
		t.Fatalf("the draw again: %+v, %v", st, err)
	}
	onTheReplica("draw", func(st sale.LineState) bool { return st.Drawn && st.Placed == 4 })

	from, to, ts, err := l.Next(ctx, a.ID, 2)
	if err != nil || to-from != 2 {
		t.Fatalf("Next(2) = %d, %d, %v", from, to, err)
	}
	for i := range ts {
		ts[i].Outcome, ts[i].OrderToken, ts[i].AmountCents = sale.OutcomeWon, fmt.Sprintf("o-%d", i), 100
	}
	replica.Pause(t)
	refused("record", stopped.Admit(ctx, a.ID, from, to, ts, 1))
	_, err = stopped.Skip(ctx, a.ID, to)
	refused("skip", err)
	replica.Resume(t)
	if err := l.Admit(ctx, a.ID, from, to, ts, 1); err != nil {
		t.Fatalf("the record again: %v", err)
	}
	onTheReplica("record", func(st sale.LineState) bool { return st.Head >= 2 })
	if head, err := l.Skip(ctx, a.ID, to); err != nil || head != 4 {
		t.Fatalf("the skip again: %d, %v", head, err)
	}
	onTheReplica("skip", func(st sale.LineState) bool { return st.Head == 4 })
	tk, _, err := onReplica.Ticket(ctx, ts[1].Token)
	if err != nil || tk.Outcome != sale.OutcomeWon || tk.OrderToken != "o-1" {
		t.Fatalf("the replica's second ticket: %+v, %v; want won, order o-1", tk, err)
	}
}
