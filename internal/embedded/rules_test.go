package embedded_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"seckill/internal/embedded"
	"seckill/internal/sale"
	"seckill/internal/saletest"
	"seckill/internal/sqlstore"
)

// TestGateRules runs the rules every gate keeps (saletest.GateTests) on the embedded gate, with
// its real SQLite journal.
func TestGateRules(t *testing.T) {
	saletest.GateTests(t, func(t *testing.T) sale.Gate {
		j, err := sqlstore.OpenJournal(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "db"))
		if err != nil {
			t.Fatal(err)
		}
		g := embedded.NewGate(j, 64, embedded.NewQueue(j, time.Second, 0).Wake)
		t.Cleanup(func() { g.Close(); j.Close() })
		return g
	})
}

// TestLineRules runs the rules every line keeps (saletest.LineTests) on the embedded line, with
// its real SQLite journal; reopening it rebuilds it from the journal, as a restart does.
func TestLineRules(t *testing.T) {
	saletest.LineTests(t, func(t *testing.T) (sale.Line, func() sale.Line) {
		dsn := "sqlite:" + filepath.Join(t.TempDir(), "db")
		acts := map[string]sale.Activity{}
		for _, id := range []string{"line-early", "line-cap", "line-lottery", "line-admit", "line-crowd", "line-race", "line-keyed"} {
			acts[id] = saletest.LineItem(id, 1, sale.AdmitQueue)
		}
		lookup := func(_ context.Context, id string) (sale.Activity, error) {
			a, ok := acts[id]
			if !ok {
				return sale.Activity{}, sale.ErrNotFound
			}
			return a, nil
		}
		open := func() sale.Line {
			j, err := sqlstore.OpenLineJournal(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			l, err := embedded.OpenLine(context.Background(), j, lookup)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close(); j.Close() })
			return l
		}
		return open(), open
	})
}

// TestLeaseRules runs the rules every lease keeps (saletest.LeaseTests) on the in-process lease.
func TestLeaseRules(t *testing.T) {
	saletest.LeaseTests(t, func(*testing.T) sale.Lease { return embedded.NewLease(time.Now) })
}
