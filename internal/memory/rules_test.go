package memory_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"seckill/internal/memory"
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
		g := memory.NewGate(j, 64, memory.NewQueue(j, time.Second, 0).Wake)
		t.Cleanup(func() { g.Close(); j.Close() })
		return g
	})
}
