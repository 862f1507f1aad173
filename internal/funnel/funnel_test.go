package funnel

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func TestBucketsCoverEveryValueInOrder(t *testing.T) {
	prev := -1
	for us := int64(0); us < 1<<20; us++ {
		b := bucketOf(time.Duration(us) * time.Microsecond)
		if b < prev || b > prev+1 {
			t.Fatalf("%dµs in bucket %d after bucket %d: buckets must be contiguous and ordered", us, b, prev)
		}
		if up := upper(b); us > up || float64(up) > float64(us)*1.25+1 {
			t.Fatalf("%dµs in bucket %d whose upper bound is %d", us, b, up)
		}
		prev = b
	}
	if b := bucketOf(time.Hour); b != buckets-1 {
		t.Errorf("an hour lands in bucket %d, want the last (%d)", b, buckets-1)
	}
	if b := bucketOf(-time.Second); b != 0 {
		t.Errorf("a negative duration lands in bucket %d, want 0", b)
	}
}

func TestViewCountsSecondsAndTotals(t *testing.T) {
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	tr := New(c.now)
	// Second 0: 99 wins at 1 ms and one sold out at 50 ms. Second 1: nothing. Second 2: 10
	// rate limited at 100µs.
	for range 99 {
		tr.Record("a", Won, time.Millisecond)
	}
	tr.Record("a", SoldOut, 50*time.Millisecond)
	c.add(2 * time.Second)
	for range 10 {
		tr.Record("a", RateLimited, 100*time.Microsecond)
	}
	tr.Record("b", Won, time.Second) // another activity stays apart
	c.add(time.Second)

	v := tr.View("a")
	if len(v.Seconds) != Window {
		t.Fatalf("%d seconds, want %d", len(v.Seconds), Window)
	}
	last := v.Seconds[Window-3:]
	start := c.now().Unix() - 3
	want := []Point{
		{Unix: start, Requests: 100, Won: 99, P50: upper(bucketOf(time.Millisecond)), P99: upper(bucketOf(time.Millisecond))},
		{Unix: start + 1},
		{Unix: start + 2, Requests: 10, P50: upper(bucketOf(100 * time.Microsecond)), P99: upper(bucketOf(100 * time.Microsecond))},
	}
	if !slices.Equal(last, want) {
		t.Fatalf("last seconds = %+v, want %+v", last, want)
	}
	if got := v.Totals; got["won"] != 99 || got["sold_out"] != 1 || got["rate_limited"] != 10 || got["busy"] != 0 {
		t.Errorf("totals = %v", got)
	}
	if len(v.Totals) != int(stages) {
		t.Errorf("totals name %d stages, want every one of %d (zeros included)", len(v.Totals), stages)
	}

	// A minute later the seconds have rolled out of the window; the totals stay.
	c.add(Window * time.Second)
	v = tr.View("a")
	for _, p := range v.Seconds {
		if p.Requests != 0 {
			t.Fatalf("second %d still counts %d requests a minute later", p.Unix, p.Requests)
		}
	}
	if v.Totals["won"] != 99 {
		t.Errorf("won total = %d after the window moved, want 99", v.Totals["won"])
	}
	if u := tr.View("nobody"); len(u.Seconds) != Window || u.Totals["won"] != 0 {
		t.Errorf("view of an unrecorded activity = %+v", u)
	}
}

func TestP99SeesTheSlowOnePercent(t *testing.T) {
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	tr := New(c.now)
	for i := range 1000 {
		d := time.Millisecond
		if i%100 == 0 { // 10 of 1000 at 80 ms: the p99 is at the edge of the slow ones
			d = 80 * time.Millisecond
		}
		tr.Record("a", Won, d)
	}
	c.add(time.Second)
	p := tr.View("a").Seconds[Window-1]
	if p.P50 < 1000 || p.P50 > 1250 {
		t.Errorf("p50 = %dµs, want 1 ms within a bucket", p.P50)
	}
	if p.P99 < 1000 || p.P99 > 1250 {
		t.Errorf("p99 = %dµs: 990 of 1000 took 1 ms, so the 99th percentile is 1 ms", p.P99)
	}
	for range 6 { // the next second has only slow requests

		tr.Record("a", Won, 80*time.Millisecond)
	}
	c.add(time.Second)
	if p := tr.View("a").Seconds[Window-1]; p.P99 < 80_000 || p.P99 > 100_000 {
		t.Errorf("p99 of six slow requests alone = %dµs, want 80 ms within a bucket", p.P99)
	}
}

func TestConcurrentRecordsAreAllCounted(t *testing.T) {
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	tr := New(c.now)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				tr.Record(fmt.Sprint("a", (g+i)%3), Stage(rand.IntN(int(stages))), time.Millisecond)
			}
		})
	}
	wg.Wait()
	var sum int64
	for _, id := range []string{"a0", "a1", "a2"} {
		for _, n := range tr.View(id).Totals {
			sum += n
		}
	}
	if sum != 8000 {
		t.Fatalf("%d grabs counted, want 8000", sum)
	}
}

func TestActivitiesAreBounded(t *testing.T) {
	tr := New(time.Now)
	for i := range MaxActivities + 10 {
		tr.Record(fmt.Sprint(i), Won, 0)
	}
	if n := tr.n.Load(); n != MaxActivities {
		t.Fatalf("following %d activities, want at most %d", n, MaxActivities)
	}
	if v := tr.View(fmt.Sprint(MaxActivities + 5)); v.Totals["won"] != 0 {
		t.Errorf("an activity past the bound was recorded: %v", v.Totals)
	}
}

func BenchmarkRecord(b *testing.B) {
	tr := New(time.Now)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tr.Record("hot", Won, 300*time.Microsecond)
		}
	})
}
