package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/redistest"
	"seckill/internal/sale"
)

// benchRedis dials a fresh real Redis (no AOF), closed when b ends.
func benchRedis(b *testing.B) redis.UniversalClient {
	rdb, err := Dial(context.Background(), redistest.Start(b, redistest.Options{}).URL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rdb.Close() })
	return rdb
}

// benchGate is a gate on a fresh real Redis with one activity of the given stock.
func benchGate(b *testing.B, stock int64) (*Gate, sale.Activity) {
	g, a := New(benchRedis(b)), item("a", stock, 1)
	if err := g.Load(context.Background(), a, sale.GateState{}); err != nil {
		b.Fatal(err)
	}
	return g, a
}

// BenchmarkRedisGrabParallel: every grab wins (a new user each), 16 goroutines per CPU, each
// grab one EVALSHA of grab.lua.
func BenchmarkRedisGrabParallel(b *testing.B) {
	g, a := benchGate(b, sale.MaxStock)
	winners(b, g, a)
}

// winners grabs activity from 16 goroutines per CPU, a new user each time; every grab must win.
func winners(b *testing.B, g *Gate, a sale.Activity) {
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.Grab(context.Background(), a, sale.GrabRequest{ActivityID: a.ID, UserID: strconv.FormatInt(n.Add(1), 10), Now: t0}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRedisHotItem: one hot item, every grab a winner (a new user each), 64 goroutines
// per CPU, through three designs of the gate:
//
//   - per-request: one EVALSHA per grab on a connection of its own (the blog recipe);
//   - pipelined: one EVALSHA per grab, concurrent ones sharing a pipeline (before coalescing);
//   - coalesced: the gate as it is, grabs that arrive together leaving in one call.
//
// The grabs per second and per script call are reported beside the time per grab.
func BenchmarkRedisHotItem(b *testing.B) {
	for _, design := range []string{"per-request", "pipelined", "coalesced"} {
		b.Run(design, func(b *testing.B) {
			rdb := benchRedis(b)
			g := New(rdb)
			switch design {
			case "per-request":
				g.grabs = rdb
				g.WithBatching(Batching{MaxBatch: 1})
			case "pipelined":
				g.WithBatching(Batching{MaxBatch: 1})
			}
			a := item("a", sale.MaxStock, 1)
			if err := g.Load(context.Background(), a, sale.GateState{}); err != nil {
				b.Fatal(err)
			}
			calls, usec := scriptStats(b, rdb)
			cpu := redisCPU(b, rdb)
			var n atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(64)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := g.Grab(context.Background(), a, sale.GrabRequest{ActivityID: "a", UserID: strconv.FormatInt(n.Add(1), 10), Now: t0}); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "grabs/s")
			calls2, usec2 := scriptStats(b, rdb)
			b.ReportMetric(float64(b.N)/float64(calls2-calls), "grabs/call")
			b.ReportMetric(float64(usec2-usec)/float64(b.N), "script-µs/grab")
			b.ReportMetric((redisCPU(b, rdb)-cpu)*1e6/float64(b.N), "redis-cpu-µs/grab")
		})
	}
}

// redisCPU reads the CPU seconds Redis has used (user and system, all its threads).
func redisCPU(b *testing.B, rdb redis.UniversalClient) float64 {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var s float64
	for _, line := range strings.Split(info, "\r\n") {
		for _, k := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				f, _ := strconv.ParseFloat(v, 64)
				s += f
			}
		}
	}
	return s
}

// BenchmarkClusterHotItem: one hot item on a three-master Redis Cluster (no AOF), every grab a
// winner, 64 goroutines per CPU, its stock in one counter or split into three on three slots.
func BenchmarkClusterHotItem(b *testing.B) {
	rdb, err := Dial(context.Background(), redistest.StartCluster(b).Seeds())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rdb.Close() })
	for _, shards := range []int64{1, 3} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			g := New(rdb)
			a := item(fmt.Sprint("hot", shards, "-", b.N), sale.MaxStock, 1)
			a.StockShards = shards
			if err := g.Load(context.Background(), a, sale.GateState{}); err != nil {
				b.Fatal(err)
			}
			var n atomic.Int64
			b.SetParallelism(64)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := g.Grab(context.Background(), a, sale.GrabRequest{ActivityID: a.ID, UserID: strconv.FormatInt(n.Add(1), 10), Now: t0}); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "grabs/s")
		})
	}
}

// BenchmarkClusterShardedSoldOut: the crowd after the last unit of an item whose stock is split
// into three shards on a three-master Redis Cluster, 16 goroutines per CPU, each grab a new user
// (at home on any shard). Each grab is out of units at home; once this node has found the other
// shards empty, grab.lua tells it sold out with nothing reserved (othersEmpty):
//
//	go test -run '^$' -bench ClusterShardedSoldOut -benchtime 20000x ./internal/redisstore
func BenchmarkClusterShardedSoldOut(b *testing.B) {
	rdb, err := Dial(context.Background(), redistest.StartCluster(b).Seeds())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rdb.Close() })
	g := New(rdb)
	a := item(fmt.Sprint("sold-", b.N), 0, 1)
	a.StockShards = 3
	if err := g.Load(context.Background(), a, sale.GateState{}); err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			u := "late-" + strconv.FormatInt(n.Add(1), 10)
			if _, err := g.Grab(context.Background(), a, sale.GrabRequest{ActivityID: a.ID, UserID: u, Now: t0}); !errors.Is(err, sale.ErrSoldOut) {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRedisGrabRedPacketParallel is BenchmarkRedisGrabParallel on a red packet of two
// million shares: grab.lua pops a share (RPOP) besides the count. Keep -benchtime under the
// shares, so that every grab wins.
func BenchmarkRedisGrabRedPacketParallel(b *testing.B) {
	const shares = 2_000_000
	g := New(benchRedis(b))
	a := item("rp", shares, 1)
	a.Kind, a.PriceCents, a.TotalCents = sale.KindRedPacket, 0, 100*shares
	st := sale.GateState{Shares: make([]sale.Share, shares)}
	for i := range st.Shares {
		st.Shares[i] = sale.Share{Index: int64(i), AmountCents: 100}
	}
	if err := g.Load(context.Background(), a, st); err != nil {
		b.Fatal(err)
	}
	winners(b, g, a)
}

// BenchmarkRedisSoldOutParallel: the script's answer after the last unit.
func BenchmarkRedisSoldOutParallel(b *testing.B) {
	g, a := benchGate(b, 1)
	if _, err := g.Grab(context.Background(), a, sale.GrabRequest{ActivityID: "a", UserID: "first", Now: t0}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.Grab(context.Background(), a, sale.GrabRequest{ActivityID: "a", UserID: "late", Now: t0}); err != sale.ErrSoldOut {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRedisLeaderboardRank builds a red packet's sorted set of 1 M and 20 M members on a
// fresh Redis (ZADD in pipelines of 5,000) and measures one exact rank query (ZREVRANK) and the
// memory Redis reports for the key (MEMORY USAGE ... SAMPLES 0) and in all (used_memory):
//
//	go test -run '^$' -bench RedisLeaderboardRank -benchtime 20000x -timeout 30m ./internal/redisstore
func BenchmarkRedisLeaderboardRank(b *testing.B) {
	for _, n := range []int{1_000_000, 20_000_000} {
		b.Run(strconv.Itoa(n/1_000_000)+"M", func(b *testing.B) {
			ctx := context.Background()
			srv := redistest.Start(b, redistest.Options{})
			rdb, err := Dial(ctx, srv.URL())
			if err != nil {
				b.Fatal(err)
			}
			defer rdb.Close()
			// MEMORY USAGE ... SAMPLES 0 walks every member: longer than any read timeout.
			patient := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: -1, DisableIdentity: true})
			defer patient.Close()
			r := NewRanking(rdb, sale.MaxStock)
			a := sale.Activity{ID: "rain", Kind: sale.KindRedPacket, Stock: int64(n)}
			if err := r.Load(ctx, a, nil, 200); err != nil {
				b.Fatal(err)
			}
			before := redistest.UsedMemory(b, rdb)
			rng := rand.New(rand.NewPCG(uint64(n), 1))
			grabs := make([]sale.Grab, 0, 5000)
			member := func(i int) sale.Grab {
				return sale.Grab{Token: fmt.Sprintf("g%024d", i), ActivityID: a.ID, UserID: fmt.Sprintf("%024d", i),
					AmountCents: 1 + rng.Int64N(200), At: t0.Add(time.Duration(i) * time.Microsecond)}
			}
			k := rankKeysOf(a.ID)
			for lo := 0; lo < n; lo += 5000 {
				grabs = grabs[:0]
				zs := make([]redis.Z, 0, 5000)
				for i := lo; i < min(lo+5000, n); i++ {
					g := member(i)
					grabs = append(grabs, g)
					zs = append(zs, redis.Z{Score: float64(g.AmountCents), Member: rankMember(g)})
				}
				if err := rdb.ZAdd(ctx, k.zset, zs...).Err(); err != nil {
					b.Fatal(err)
				}
			}
			all := redistest.UsedMemory(b, rdb) - before
			key, err := patient.MemoryUsage(ctx, k.zset, 0).Result()
			if err != nil {
				b.Fatal(err)
			}
			probe := rand.New(rand.NewPCG(5, 6))
			b.ResetTimer()
			for range b.N {
				i := probe.IntN(len(grabs)) // the last batch's grabs: their members are known
				if _, _, _, err := r.Rank(ctx, grabs[i]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(key)/float64(n), "B/member")
			b.ReportMetric(float64(key)/1e6, "keyMB")
			b.ReportMetric(float64(all)/1e6, "usedMB")
		})
	}
}

// BenchmarkReservedSetMemory measures what a reservation would cost Redis in the layout issue
// 38's gate is to keep the reserved set in: one hash per activity on its slot, the user id to
// the wave. Each run fills a fresh hash with n reservations (ids like a shop's: "u" and twelve
// digits; waves 1 to 100) and reports MEMORY USAGE of the hash per reservation: below Redis's
// listpack limit (128 fields) and a million.
func BenchmarkReservedSetMemory(b *testing.B) {
	rdb := benchRedis(b)
	ctx := context.Background()
	for _, n := range []int{100, 1_000_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			var perReservation float64
			for i := range b.N {
				key := fmt.Sprintf("{act:bench%d-%d}:reserved", n, i)
				for from := 0; from < n; from += 1000 {
					fields := make([]any, 0, 2000)
					for u := from; u < min(from+1000, n); u++ {
						fields = append(fields, fmt.Sprintf("u%012d", u), u%100+1)
					}
					if err := rdb.HSet(ctx, key, fields...).Err(); err != nil {
						b.Fatal(err)
					}
				}
				used, err := rdb.MemoryUsage(ctx, key, 0).Result() // SAMPLES 0: every field
				if err != nil {
					b.Fatal(err)
				}
				perReservation = float64(used) / float64(n)
				if err := rdb.Del(ctx, key).Err(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(perReservation, "bytes/reservation")
		})
	}
}
