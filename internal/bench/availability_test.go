package bench

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"seckill/internal/redisstore"
)

// TestAvailability holds made-up histories to the promise: a 202 within the grace of a heal keeps
// it; a first 202 later, or a node still answering BUSY after the grace, breaks it; a heal that
// leaves another strike in force, or is followed by the next strike within the grace, or after
// which nobody clicked, is not held to it; a worker struck beside does not excuse the others.
func TestAvailability(t *testing.T) {
	const s = 1_000_000 // a second in µs
	strike := func(detail string, at int64) Record { return Record{Op: OpStrike, Detail: detail, Start: at, End: at} }
	heal := func(detail string, from, to int64) Record {
		return Record{Op: OpHeal, Detail: detail, Start: from, End: to}
	}
	grab := func(node int, start, end int64, status int) Record {
		return Record{User: "u", Node: node, Start: start, End: end, Status: status, Outcome: outcomeOf(status)}
	}
	keyed := func(r Record, key string) Record { r.Key = key; return r }
	if StruckGrace != redisstore.ResumeAfter {
		t.Fatalf("StruckGrace %s, the gate resumes a struck grab after %s", StruckGrace, redisstore.ResumeAfter)
	}
	for _, tc := range []struct {
		name                  string
		history               []Record
		heals, late, refusing int
	}{
		{"back at once", []Record{strike("kill-api 0", 0), heal("kill-api 0", 3*s, 4*s), grab(1, 4*s, 4*s+s/2, http.StatusAccepted)}, 1, 0, 0},
		{"202 late", []Record{strike("kill-redis 0", 0), heal("kill-redis 0", 3*s, 4*s),
			grab(0, 4*s, 4*s+s/10, http.StatusServiceUnavailable), grab(0, 5*s+s/2, 5*s+s/2+1, http.StatusAccepted)}, 1, 1, 0},
		{"no 202 at all", []Record{strike("db-outage 0", 0), heal("db-outage 0", 3*s, 4*s),
			grab(0, 4*s+s/2, 4*s+s/2, 0)}, 1, 1, 0},
		{"a node refusing", []Record{strike("stop-api 1", 0), heal("stop-api 1", 3*s, 4*s),
			grab(0, 4*s, 4*s+1, http.StatusAccepted), grab(1, 6*s, 6*s+1, http.StatusServiceUnavailable)}, 1, 0, 1},
		{"another in force", []Record{strike("kill-api 0", 0), strike("db-outage 0", s), heal("kill-api 0", 3*s, 4*s),
			grab(0, 5*s, 6*s, 0), heal("db-outage 0", 7*s, 8*s), grab(0, 8*s, 8*s+1, http.StatusAccepted)}, 1, 0, 0},
		{"a worker beside", []Record{strike("stop-worker 0", 0), strike("kill-redis 0", s), heal("kill-redis 0", 3*s, 4*s),
			grab(0, 4*s+s/2, 4*s+s/2+1, http.StatusServiceUnavailable), grab(0, 6*s, 6*s+1, http.StatusAccepted),
			heal("stop-worker 0", 9*s, 9*s)}, 1, 1, 0},
		{"next strike within the grace", []Record{strike("kill-api 0", 0), heal("kill-api 0", 3*s, 4*s), strike("kill-redis 0", 4*s+s/2),
			grab(0, 4*s+s/2, 7*s, 0), heal("kill-redis 0", 8*s, 9*s), grab(0, 9*s, 9*s+1, http.StatusAccepted)}, 1, 0, 0},
		{"the first 202 answered, not the first sent", []Record{strike("stop-api 1", 0), heal("stop-api 1", 3*s, 4*s),
			grab(1, 4*s, 5*s+s/2, http.StatusAccepted), grab(0, 4*s+s/10, 4*s+s/5, http.StatusAccepted)}, 1, 0, 0},
		{"nobody clicked", []Record{strike("kill-api 0", 0), heal("kill-api 0", 3*s, 4*s), grab(0, 9*s, 9*s+1, http.StatusAccepted)}, 0, 0, 0},
		{"a struck click sent again", []Record{strike("reshard 0", 0), keyed(grab(0, s, s+1, http.StatusServiceUnavailable), "k"),
			heal("reshard 0", 2*s, 3*s), grab(1, 3*s, 3*s+1, http.StatusAccepted),
			keyed(grab(0, 5*s, 5*s+1, http.StatusServiceUnavailable), "k"), keyed(grab(0, 8*s, 8*s+1, http.StatusAccepted), "k")}, 1, 0, 0},
		{"a struck click refused too long", []Record{strike("reshard 0", 0), keyed(grab(0, s, s+1, http.StatusServiceUnavailable), "k"),
			heal("reshard 0", 2*s, 3*s), grab(1, 3*s, 3*s+1, http.StatusAccepted),
			keyed(grab(0, 11*s, 11*s+1, http.StatusServiceUnavailable), "k"), grab(1, 12*s, 12*s+1, http.StatusAccepted)}, 1, 0, 1},
		{"a new click refused after the grace", []Record{strike("reshard 0", 0), heal("reshard 0", 2*s, 3*s),
			grab(1, 3*s, 3*s+1, http.StatusAccepted), keyed(grab(0, 5*s, 5*s+1, http.StatusServiceUnavailable), "new")}, 1, 0, 1},
		{"a refusal the next strike made", []Record{strike("kill-api 0", 0), heal("kill-api 0", 3*s, 4*s),
			grab(1, 4*s, 4*s+1, http.StatusAccepted), grab(1, 6*s-1, 6*s+s/2, http.StatusServiceUnavailable),
			strike("kill-redis 0", 6*s), heal("kill-redis 0", 8*s, 9*s), grab(1, 9*s, 9*s+1, http.StatusAccepted),
			grab(1, 11*s, 11*s+1, http.StatusAccepted)}, 2, 0, 0},
		{"the crowd's end within the grace", []Record{strike("kill-api 0", 0), heal("kill-api 0", 3*s, 4*s),
			keyed(grab(0, 4*s, 4*s+s/2, http.StatusServiceUnavailable), "last")}, 0, 0, 0},
		{"a failed heal", []Record{strike("kill-api 0", 0), {Op: OpHeal, Detail: "kill-api 0", Start: 3 * s, End: 4 * s, Err: "no"},
			grab(0, 4*s, 4*s+1, http.StatusServiceUnavailable)}, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.history
			if tc.name != "the crowd's end within the grace" { // the crowd goes on long after
				h = append(h, grab(2, 100*s, 100*s+1, http.StatusAccepted))
			}
			a := Availability(h)
			if a.Heals != tc.heals || a.Late != tc.late || a.Refusing != tc.refusing || a.OK() != (tc.late+tc.refusing == 0) {
				t.Fatalf("%+v; want %d heals, %d late, %d refusing", a, tc.heals, tc.late, tc.refusing)
			}
			if !a.OK() && len(a.Problems) == 0 {
				t.Fatal("a broken promise without a problem named")
			}
		})
	}
}

// TestHistoryWriter: records added from many goroutines come back whole, one per line, and the
// count says how many.
func TestHistoryWriter(t *testing.T) {
	var buf bytes.Buffer
	h := NewHistoryWriter(&buf)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				h.Add(Record{Op: OpPay, Activity: "a", User: fmt.Sprint("u", g), Token: fmt.Sprint(g, "-", i), Status: http.StatusOK})
			}
		})
	}
	wg.Wait()
	if err := h.Flush(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadHistory(&buf)
	if err != nil || len(got) != 4000 || h.Len() != 4000 {
		t.Fatalf("%d records read back (%v), %d counted; want 4000", len(got), err, h.Len())
	}
	seen := map[string]bool{}
	for _, r := range got {
		if r.Op != OpPay || seen[r.Token] {
			t.Fatalf("record %+v read back wrong or twice", r)
		}
		seen[r.Token] = true
	}
}
