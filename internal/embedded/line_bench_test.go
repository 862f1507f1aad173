package embedded_test

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"

	"seckill/internal/embedded"
	"seckill/internal/sale"
	"seckill/internal/saletest"
	"seckill/internal/sqlstore"
)

// BenchmarkLineAt1M: the embedded line with its SQLite journal, filled with a million queued
// users; B/user is the Go heap each one costs (the journal is on disk).
func BenchmarkLineAt1M(b *testing.B) {
	a := saletest.LineItem("bench-line", 100_000, sale.AdmitQueue)
	a.QueueCap = sale.MaxQueueCap
	j, err := sqlstore.OpenLineJournal(context.Background(), "sqlite:"+filepath.Join(b.TempDir(), "db"))
	if err != nil {
		b.Fatal(err)
	}
	l, err := embedded.OpenLine(context.Background(), j, func(context.Context, string) (sale.Activity, error) { return a, nil })
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close(); j.Close() })
	saletest.BenchLine(b, l, a, 1_000_000, func() int64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	})
}
