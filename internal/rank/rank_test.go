package rank

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// oracle ranks by sorting everything.
func oracle(ms []Member) []Member {
	out := slices.Clone(ms)
	slices.SortFunc(out, func(a, b Member) int {
		switch {
		case before(&a, &b):
			return -1
		case before(&b, &a):
			return 1
		}
		return 0
	})
	return out
}

func TestExactAgreesWithSorting(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tree := NewExact()
		var live []Member
		steps := rapid.IntRange(1, 300).Draw(t, "steps")
		for i := range steps {
			if len(live) > 0 && rapid.IntRange(0, 4).Draw(t, "remove?") == 0 {
				k := rapid.IntRange(0, len(live)-1).Draw(t, "which")
				tree.Remove(live[k].ID)
				live = slices.Delete(live, k, k+1)
				continue
			}
			m := Member{ID: fmt.Sprint("g", i), User: fmt.Sprint("u", i),
				Amount: rapid.Int64Range(1, 20).Draw(t, "amount"), At: rapid.Int64Range(0, 10).Draw(t, "at")}
			tree.Add(m)
			tree.Add(m) // again: nothing changes
			live = append(live, m)
		}
		want := oracle(live)
		if tree.Len() != len(want) {
			t.Fatalf("Len %d, want %d", tree.Len(), len(want))
		}
		for i, m := range want {
			if r := tree.Rank(m.ID); r != i+1 {
				t.Fatalf("Rank(%s) = %d, want %d", m.ID, r, i+1)
			}
		}
		n := rapid.IntRange(0, len(want)+2).Draw(t, "top")
		if got := tree.Top(n); !slices.Equal(got, want[:min(n, len(want))]) {
			t.Fatalf("Top(%d) = %v, want %v", n, got, want[:min(n, len(want))])
		}
		if tree.Rank("nobody") != 0 {
			t.Fatal("an unknown id has a rank")
		}
	})
}

func TestApproxIsWithinItsBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		max := rapid.Int64Range(1, 100_000).Draw(t, "max")
		h := NewApprox(max, rapid.IntRange(1, 64).Draw(t, "buckets"))
		var ms []Member
		for i := range rapid.IntRange(1, 400).Draw(t, "members") {
			// Some amounts above max: a last share can be the largest.
			m := Member{ID: fmt.Sprint("g", i), Amount: rapid.Int64Range(1, max+max/4+1).Draw(t, "amount"), At: int64(i)}
			h.Add(m.Amount)
			ms = append(ms, m)
		}
		want := oracle(ms)
		for i, m := range want {
			est, bound := h.Rank(m.Amount)
			if d := est - int64(i+1); d > bound || -d > bound {
				t.Fatalf("member %d of amount %d: estimate %d ± %d, true rank %d", i, m.Amount, est, bound, i+1)
			}
		}
	})
}

// TestApproxBoundIsSmallOnARealSplit: on a real double-mean split with 1,024 buckets the bound
// stays a small share of the members.
func TestApproxBoundIsSmallOnARealSplit(t *testing.T) {
	const n = 100_000
	rng := rand.New(rand.NewPCG(1, 2))
	h := NewApprox(2*100, Buckets) // mean 100 cents: shares are drawn from [1, 200]
	worst := int64(0)
	for range n {
		h.Add(1 + rng.Int64N(200))
	}
	for a := int64(1); a <= 200; a++ {
		_, b := h.Rank(a)
		worst = max(worst, b)
	}
	if worst > n/100 {
		t.Fatalf("the worst bound is %d of %d members, want under 1 %%", worst, n)
	}
}
