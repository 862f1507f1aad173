package sale

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestSplitRedPacketSumsExactly(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		count := rapid.Int64Range(1, 2000).Draw(t, "count")
		total := rapid.Int64Range(count, count*1000).Draw(t, "total")
		seed := rapid.Uint64().Draw(t, "seed")
		rng := rand.New(rand.NewPCG(seed, 1))
		shares, err := SplitRedPacket(total, count, rng.Int64N)
		if err != nil {
			t.Fatalf("SplitRedPacket(%d, %d): %v", total, count, err)
		}
		if int64(len(shares)) != count {
			t.Fatalf("got %d shares, want %d", len(shares), count)
		}
		var sum int64
		for i, s := range shares {
			if s < 1 {
				t.Fatalf("share %d = %d cents, want >= 1", i, s)
			}
			sum += s
		}
		if sum != total {
			t.Fatalf("shares sum to %d, want %d", sum, total)
		}
	})
}

func TestSplitRedPacketRefusesImpossibleSplits(t *testing.T) {
	for _, tc := range []struct{ total, count int64 }{{5, 6}, {0, 0}, {10, -1}, {MaxCents + 1, 1}} {
		if _, err := SplitRedPacket(tc.total, tc.count, rand.Int64N); !errors.Is(err, ErrInvalid) {
			t.Errorf("SplitRedPacket(%d, %d) error = %v, want ErrInvalid", tc.total, tc.count, err)
		}
	}
}

func TestSplitRedPacketIsNotDegenerate(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	shares, err := SplitRedPacket(10_000, 100, rng.Int64N)
	if err != nil {
		t.Fatal(err)
	}
	distinct := map[int64]bool{}
	for _, s := range shares {
		distinct[s] = true
	}
	if len(distinct) < 20 {
		t.Errorf("100 shares of 100.00 took only %d distinct amounts; the split is not random", len(distinct))
	}
}

// TestRedPacketCountIsBounded: a red packet of more than MaxShares shares is refused before
// anything is split or allocated; MaxShares itself is split.
func TestRedPacketCountIsBounded(t *testing.T) {
	if _, err := SplitRedPacket(3*MaxShares, MaxShares+1, rand.New(rand.NewPCG(1, 2)).Int64N); !errors.Is(err, ErrInvalid) {
		t.Fatalf("split into MaxShares+1: %v, want ErrInvalid", err)
	}
	a := Activity{ID: "rp", Name: "rain", Kind: KindRedPacket, Stock: MaxShares + 1, TotalCents: 3 * MaxShares, PerUserLimit: 1,
		StartAt: time.Unix(1_000_000_000, 0), EndAt: time.Unix(1_000_003_600, 0), PayWindow: time.Minute, Admission: AdmitDirect, StockShards: 1}
	if err := a.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "count") {
		t.Fatalf("a red packet of MaxShares+1: %v, want ErrInvalid naming the count", err)
	}
	a.Stock = MaxShares
	if err := a.Validate(); err != nil {
		t.Fatalf("a red packet of MaxShares: %v", err)
	}
	shares, err := SplitRedPacket(3*MaxShares, MaxShares, rand.New(rand.NewPCG(1, 2)).Int64N)
	if err != nil || len(shares) != MaxShares {
		t.Fatalf("split into MaxShares: %d shares, %v", len(shares), err)
	}
}

// FuzzSplitRedPacket: any (total, count) is either refused as invalid or split into count
// shares of at least a cent summing to total, the same shares for the same seed.
func FuzzSplitRedPacket(f *testing.F) {
	for _, s := range [][3]int64{{100, 10, 1}, {1, 1, 2}, {5, 6, 3}, {MaxCents, 1000, 4}, {0, 0, 5}, {-5, 2, 6}, {7, MaxStock + 1, 7}} {
		f.Add(s[0], s[1], uint64(s[2]))
	}
	f.Fuzz(func(t *testing.T, total, count int64, seed uint64) {
		if count > 100_000 {
			count %= 100_000 // bounded work per input; the bounds checks are in the seeds
		}
		split := func() ([]int64, error) {
			return SplitRedPacket(total, count, rand.New(rand.NewPCG(seed, 9)).Int64N)
		}
		shares, err := split()
		if count < 1 || total < count || total > MaxCents {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("SplitRedPacket(%d, %d) = %v, want ErrInvalid", total, count, err)
			}
			return
		}
		if err != nil || int64(len(shares)) != count {
			t.Fatalf("SplitRedPacket(%d, %d): %d shares, %v", total, count, len(shares), err)
		}
		var sum int64
		for _, s := range shares {
			if s < 1 {
				t.Fatalf("a share of %d cents", s)
			}
			sum += s
		}
		if sum != total {
			t.Fatalf("shares sum to %d, want %d", sum, total)
		}
		again, _ := split()
		if !slices.Equal(shares, again) {
			t.Fatal("the same seed split differently")
		}
	})
}
