package capacity

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"seckill/internal/sale"
)

var costs = Costs{Loss: 50e-6, Win: 200e-6, Grab: 100e-6, RedisAll: 300e-6, Place: 50e-6, Write: 50e-6, OrdersPerS: 4000}

func TestSize(t *testing.T) {
	base := Sale{Peak: 100_000, Users: 1_000_000, Stock: 1000, PerUser: 1, Kind: sale.KindItem,
		Drain: time.Minute, Cores: 8, Headroom: 0.5}
	tests := []struct {
		name   string
		change func(*Sale)
		want   Plan // the figures compared; Sale, Costs and Notes are not
		notes  []string
	}{
		{"a flash far above one master", func(*Sale) {}, Plan{
			Wins: 1000, MasterRate: 5000, Shards: 1, WinRate: 5000, SellS: 0.2, Masters: 1, Replicas: 1, RedisCores: 1.5,
			// 5,000 wins × 200 µs + 95,000 others × 50 µs = 5.75 cores, 4 cores a node.
			APICores: 5.75, APINodes: 2, WorkerNodes: 2, WorkerRate: 5000, OrderRate: 5000, WorkerCores: 0.25, DrainS: 0,
			DBCores: 0.5, RateUser: DefaultRateUser, RateNode: 2500,
		}, []string{"under 1s: no shards", "SECKILL_RATE_NODE=2500", "up to 3.8 s past the sell-out"}},
		{"a peak one master takes", func(s *Sale) { s.Peak = 4000 }, Plan{
			Wins: 1000, MasterRate: 5000, Shards: 1, WinRate: 4000, SellS: 0.25, Masters: 1, Replicas: 1, RedisCores: 1.2,
			APICores: 0.8, APINodes: 2, WorkerNodes: 2, WorkerRate: 5000, OrderRate: 4000, WorkerCores: 0.2,
			DBCores: 0.4, RateUser: DefaultRateUser,
		}, []string{"one master takes the peak's grabs at 50 % of a core: no shards"}},
		{"an all-win drop sharded", func(s *Sale) { s.Stock, s.Users, s.Peak = 2_000_000, 2_000_000, 40_000 }, Plan{
			Wins: 2_000_000, MasterRate: 5000, Shards: 8, WinRate: 40_000, SellS: 50, Masters: 8, Replicas: 1, RedisCores: 12,
			// 40,000 × 200 µs = 8 cores: 2 nodes at 4 each. The orders may take 50 s + 1 min:
			// 18,182/s, 4 workers of 5,000/s, done 50 s later than the wins.
			APICores: 8, APINodes: 2, WorkerNodes: 4, WorkerRate: 5000, OrderRate: 20_000, WorkerCores: 1, DrainS: 50,
			DBCores: 2, RateUser: DefaultRateUser,
		}, []string{"split into 8 shards"}},
		{"a long red-packet rain on one master", func(s *Sale) { s.Kind, s.Stock, s.Users, s.Peak = sale.KindRedPacket, 100_000, 1_000_000, 20_000 }, Plan{
			Wins: 100_000, MasterRate: 5000, Shards: 1, WinRate: 5000, SellS: 20, Masters: 1, Replicas: 1, RedisCores: 1.5,
			APICores: 1.75, APINodes: 2, WorkerNodes: 2, WorkerRate: 5000, OrderRate: 5000, WorkerCores: 0.25,
			DBCores: 0.5, RateUser: DefaultRateUser, RateNode: 2500,
		}, []string{"split the rain into several packets", "SECKILL_RATE_NODE=2500"}},
		{"a replica for every grab", func(s *Sale) { s.MinReplicas = 1; s.Peak = 4000 }, Plan{
			Wins: 1000, MasterRate: 5000, Shards: 1, WinRate: 4000, SellS: 0.25, Masters: 3, Replicas: 2, RedisCores: 1.2,
			APICores: 0.8, APINodes: 2, WorkerNodes: 2, WorkerRate: 5000, OrderRate: 4000, WorkerCores: 0.2,
			DBCores: 0.4, RateUser: DefaultRateUser,
		}, nil},
		{"shards asked for", func(s *Sale) { s.Shards = 4 }, Plan{
			Wins: 1000, MasterRate: 5000, Shards: 4, WinRate: 20_000, SellS: 0.05, Masters: 4, Replicas: 1, RedisCores: 6,
			APICores: 8, APINodes: 2, WorkerNodes: 2, WorkerRate: 5000, OrderRate: 10_000, WorkerCores: 0.5, DrainS: 0.05,
			DBCores: 1, RateUser: DefaultRateUser, RateNode: 10_000,
		}, nil},
		{"a ramp makes its peak", func(s *Sale) { s.Peak, s.Ramp, s.Clicks, s.Users = 0, 100*time.Second, 2, 200_000 }, Plan{
			// 200,000 users clicking twice over 100 s: 4,000 a second, under one master.
			Wins: 1000, MasterRate: 5000, Shards: 1, WinRate: 4000, SellS: 0.25, Masters: 1, Replicas: 1, RedisCores: 1.2,
			APICores: 0.8, APINodes: 2, WorkerNodes: 2, WorkerRate: 5000, OrderRate: 4000, WorkerCores: 0.2,
			DBCores: 0.4, RateUser: DefaultRateUser,
		}, []string{"one master takes the peak's grabs"}},
		{"wins come as fast as the workers must", func(s *Sale) { s.Drain = 0; s.Stock, s.Users, s.Peak = 2_000_000, 2_000_000, 40_000 }, Plan{
			Wins: 2_000_000, MasterRate: 5000, Shards: 8, WinRate: 40_000, SellS: 50, Masters: 8, Replicas: 1, RedisCores: 12,
			APICores: 8, APINodes: 2, WorkerNodes: 8, WorkerRate: 5000, OrderRate: 40_000, WorkerCores: 2,
			DBCores: 4, RateUser: DefaultRateUser,
		}, []string{"a worker placing 5,000 orders/s goes beyond the 4,000/s", "40,000/s into one database"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := base
			tc.change(&s)
			p, err := Size(s, costs)
			if err != nil {
				t.Fatal(err)
			}
			got := p
			got.Sale, got.Costs, got.Notes = Sale{}, Costs{}, nil
			if !plansNear(got, tc.want) {
				t.Errorf("plan\n got %+v\nwant %+v", got, tc.want)
			}
			notes := strings.Join(p.Notes, "\n")
			for _, n := range tc.notes {
				if !strings.Contains(notes, n) {
					t.Errorf("notes %q: want %q", notes, n)
				}
			}
			var text, js bytes.Buffer
			if err := p.WriteText(&text); err != nil || !strings.Contains(text.String(), "API nodes") {
				t.Errorf("text: %v\n%s", err, text.String())
			}
			var back Plan
			if err := p.WriteJSON(&js); err != nil || json.Unmarshal(js.Bytes(), &back) != nil || back.APINodes != p.APINodes || back.Costs.Grab != costs.Grab {
				t.Errorf("json: %v\n%s", err, js.String())
			}
		})
	}
}

// plansNear compares the figures of two plans, the floating ones to a rounding.
func plansNear(a, b Plan) bool {
	fa, fb := []float64{a.MasterRate, a.WinRate, a.SellS, a.RedisCores, a.APICores, a.WorkerCores, a.WorkerRate, a.OrderRate, a.DrainS, a.DBCores},
		[]float64{b.MasterRate, b.WinRate, b.SellS, b.RedisCores, b.APICores, b.WorkerCores, b.WorkerRate, b.OrderRate, b.DrainS, b.DBCores}
	for i := range fa {
		if math.Abs(fa[i]-fb[i]) > 1e-6*math.Max(1, math.Abs(fb[i])) {
			return false
		}
	}
	a.MasterRate, a.WinRate, a.SellS, a.RedisCores, a.APICores, a.WorkerCores, a.WorkerRate, a.OrderRate, a.DrainS, a.DBCores = fb[0], fb[1], fb[2], fb[3], fb[4], fb[5], fb[6], fb[7], fb[8], fb[9]
	return a.Wins == b.Wins && a.Shards == b.Shards && a.Masters == b.Masters && a.Replicas == b.Replicas &&
		a.APINodes == b.APINodes && a.WorkerNodes == b.WorkerNodes && a.RateUser == b.RateUser && a.RateNode == b.RateNode
}

func TestSizeRefuses(t *testing.T) {
	good := Sale{Peak: 1000, Users: 1000, Stock: 10, PerUser: 1, Kind: sale.KindItem, Cores: 8, Headroom: 0.5}
	for name, tc := range map[string]struct {
		change func(*Sale)
		want   string
	}{
		"no peak":             {func(s *Sale) { s.Peak = 0 }, "--peak 0"},
		"a peak of NaN":       {func(s *Sale) { s.Peak = math.NaN() }, "--peak NaN"},
		"no users":            {func(s *Sale) { s.Users = 0 }, "--users 0"},
		"no stock":            {func(s *Sale) { s.Stock = 0 }, "--stock 0"},
		"no per-user":         {func(s *Sale) { s.PerUser = 0 }, "--per-user-limit 0"},
		"a coupon":            {func(s *Sale) { s.Kind = "coupon" }, `--kind "coupon"`},
		"a negative drain":    {func(s *Sale) { s.Drain = -time.Second }, "--drain -1s"},
		"no cores":            {func(s *Sale) { s.Cores = 0 }, "--cores 0"},
		"headroom above 1":    {func(s *Sale) { s.Headroom = 1.5 }, "--headroom 1.5"},
		"three replicas":      {func(s *Sale) { s.MinReplicas = 3 }, "--min-replicas 3"},
		"shards of 65":        {func(s *Sale) { s.Shards = 65 }, "--shards 65"},
		"a sharded packet":    {func(s *Sale) { s.Kind, s.Shards = sale.KindRedPacket, 2 }, "only an item's stock shards"},
		"a peak and a ramp":   {func(s *Sale) { s.Ramp, s.Clicks = time.Minute, 1 }, "not both"},
		"a ramp of no clicks": {func(s *Sale) { s.Peak, s.Ramp, s.Clicks = 0, time.Minute, 0 }, "--clicks 0"},
		"a ramp too steep":    {func(s *Sale) { s.Peak, s.Ramp, s.Clicks, s.Users = 0, time.Millisecond, 100, 1e9 }, "want 1 to"},
		"a negative ramp":     {func(s *Sale) { s.Peak, s.Ramp, s.Clicks = 0, -time.Minute, 1 }, "--arrival ramp:-1m0s"},
	} {
		s := good
		tc.change(&s)
		if _, err := Size(s, costs); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", name, err, tc.want)
		}
	}
	for _, c := range []Costs{{Win: 1e-4}, {Loss: 1e-5, Win: 1e-4, Grab: 2, Place: 1e-5}, {Loss: -1e-5, Win: 1e-4, Grab: 1e-4, Place: 1e-5}} {
		if _, err := Size(good, c); !errors.Is(err, ErrNoRun) {
			t.Errorf("costs %+v: err %v, want ErrNoRun", c, err)
		}
	}
}
