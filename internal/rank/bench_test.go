package rank

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
)

// The leaderboard benchmarks build a red packet's leaderboard of 1 M and 20 M members once
// (double-mean shares of a 100-cent mean, one grab a microsecond) and measure a rank query and
// the memory the structure holds, as bytes per member and MB in all:
//
//	go test -run '^$' -bench 'Rank' -benchtime 200000x ./internal/rank
var sizes = []int{1_000_000, 20_000_000}

type built struct {
	exact           *Exact
	approx          *Approx
	ids             []string
	amount          []int64
	exactB, approxB uint64
}

var (
	boards   = map[int]*built{}
	boardsMu sync.Mutex
)

func heap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func board(n int) *built {
	boardsMu.Lock()
	defer boardsMu.Unlock()
	if b, ok := boards[n]; ok {
		return b
	}
	for k := range boards { // one at a time: 20 M members take gigabytes
		delete(boards, k)
	}
	rng := rand.New(rand.NewPCG(uint64(n), 1))
	b := &built{ids: make([]string, n), amount: make([]int64, n)}
	for i := range n {
		b.ids[i] = fmt.Sprintf("g%024d", i)
		b.amount[i] = 1 + rng.Int64N(200)
	}
	before := heap()
	b.exact = NewExact()
	for i := range n {
		b.exact.Add(Member{ID: b.ids[i], User: b.ids[i][1:], Amount: b.amount[i], At: int64(i)})
	}
	b.exactB = heap() - before
	before = heap()
	b.approx = NewApprox(200, Buckets)
	for i := range n {
		b.approx.Add(b.amount[i])
	}
	b.approxB = heap() - before
	boards[n] = b
	return b
}

func BenchmarkExactRank(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("%dM", n/1_000_000), func(b *testing.B) {
			bd := board(n)
			rng := rand.New(rand.NewPCG(3, 4))
			b.ResetTimer()
			for range b.N {
				if bd.exact.Rank(bd.ids[rng.IntN(n)]) == 0 {
					b.Fatal("a member has no rank")
				}
			}
			b.ReportMetric(float64(bd.exactB)/float64(n), "B/member")
			b.ReportMetric(float64(bd.exactB)/1e6, "MB")
		})
	}
}

func BenchmarkExactTop100(b *testing.B) {
	bd := board(sizes[0])
	b.ResetTimer()
	for range b.N {
		if len(bd.exact.Top(100)) != 100 {
			b.Fatal("short top")
		}
	}
}

func BenchmarkApproxRank(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("%dM", n/1_000_000), func(b *testing.B) {
			bd := board(n)
			rng := rand.New(rand.NewPCG(3, 4))
			b.ResetTimer()
			for range b.N {
				if est, _ := bd.approx.Rank(bd.amount[rng.IntN(n)]); est < 1 {
					b.Fatal("a rank below 1")
				}
			}
			b.ReportMetric(float64(bd.approxB), "B")
		})
	}
}
