package embedded_test

import (
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"seckill/internal/breaker"
	"seckill/internal/embedded"
	"seckill/internal/sale"
	"seckill/internal/sqlstore"
)

// TestPlacingAroundABusyWriter: on SQLite, with the database's write lock held by another
// connection, a grab is journaled within PlaceWithin rather than waiting out the lock, and the
// database's breaker does not count the placement given up as a failure of the database.
func TestPlacingAroundABusyWriter(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "seckill.db")
	store, err := sqlstore.Open(ctx, "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	journal, err := sqlstore.OpenJournal(ctx, "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer journal.Close()
	now := time.Now()
	a := sale.Activity{ID: "busy", Name: "busy", Kind: sale.KindItem, Stock: 10, PriceCents: 100, PerUserLimit: 1,
		StartAt: now.Add(-time.Minute), EndAt: now.Add(time.Hour), PayWindow: time.Minute, Admission: sale.AdmitDirect}
	if err := store.CreateActivity(ctx, a, nil); err != nil {
		t.Fatal(err)
	}
	guard := breaker.NewGuard(breaker.Database, breaker.Thresholds{}, time.Now)
	p := embedded.NewPlacing(breaker.GuardStore(store, guard), journal, nil, slog.New(slog.DiscardHandler))
	p.PlaceWithin = 100 * time.Millisecond
	g := embedded.NewGate(p, 64, nil)
	defer g.Close()
	if err := g.Load(ctx, a, sale.GateState{}); err != nil {
		t.Fatal(err)
	}

	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	grab, err := g.Grab(ctx, a, sale.GrabRequest{ActivityID: a.ID, UserID: "u1", Now: now})
	waited := time.Since(began)
	if err != nil {
		t.Fatalf("a grab while another connection holds the write lock: %v", err)
	}
	if waited > 5*time.Second { // a liveness bound: the lock's busy timeout is 10 s
		t.Fatalf("the grab waited %s, for the lock", waited)
	}
	if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	if q, err := journal.QueuedGrab(ctx, grab.Token); err != nil || q.UserID != "u1" {
		t.Fatalf("the grab is not in the journal: %+v, %v", q, err)
	}
	if r := guard.Report(); r.ErrorRate != 0 || r.Breaker != "closed" {
		t.Fatalf("the database's guard after a placement given up: %+v, want no failure counted", r)
	}
}
