package bench

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
)

// AvailabilityGrace is what the deployment's promise allows after a struck part is back (a node
// listening again, a replica promoted, a server taking writes): within it, a grab is answered
// 202 again, and no node refuses any more.
const AvailabilityGrace = time.Second

// StruckGrace is how much longer a click the fault struck may be refused when its buyer sends it
// again after the heal: the gate resumes a grab that gave up half-way once it is surely over
// (redisstore.ResumeAfter, which TestAvailability holds it to), and answers its repeats busy
// until then.
const StruckGrace = 6 * time.Second

// AvailabilityReport holds a nemesis run's deployment to its promise after each heal that left
// no other strike in force (a worker's aside: the queue keeps the grabs it has not placed), until
// the next strike: the first 202 within AvailabilityGrace of the
// heal's end (the fault's own recovery, the restart or the takeover, is the heal's time), and no
// node answering BUSY, a server error or nothing after that, to a click sent for the first time,
// or, StruckGrace longer, to one the fault struck that its buyer sends again (a click still in
// flight when the next strike came is that strike's). A heal is judged only when the crowd
// clicked in its grace and went on clicking after it. A broken promise's problem says what the
// machine did meanwhile, where the history samples it (OpMachine).
type AvailabilityReport struct {
	Heals    int      `json:"heals"`    // the heals held to the promise
	Late     int      `json:"late"`     // of them, those after which no 202 came within the grace
	Refusing int      `json:"refusing"` // nodes that refused after a heal's grace, once per heal
	WorstS   float64  `json:"worst_s"`  // the longest from a heal's end to the first 202 after it
	Problems []string `json:"problems,omitempty"`
}

// OK reports whether the promise held after every heal.
func (a AvailabilityReport) OK() bool { return a.Late == 0 && a.Refusing == 0 }

// fault is one strike of a history, from its start to the end of its heal.
type fault struct {
	detail    string
	start     int64
	healStart int64
	healEnd   int64
	healed    bool
	worker    bool // a worker node struck
}

// Availability reads the strikes, heals and grabs of a nemesis run's history and holds the
// deployment to its promise (see AvailabilityReport).
func Availability(history []Record) AvailabilityReport {
	var rep AvailabilityReport
	var faults []*fault
	open := map[string][]*fault{} // by activity and detail: the strikes not healed yet
	var grabs, machine []Record
	for _, r := range history {
		switch r.Op {
		case OpMachine:
			machine = append(machine, r)
		case OpStrike:
			f := &fault{detail: r.Detail, start: r.Start, worker: strings.HasPrefix(r.Detail, KillWorker) || strings.HasPrefix(r.Detail, StopWorker) ||
				strings.HasPrefix(r.Detail, SkewWorker)}
			faults = append(faults, f)
			open[r.Activity+" "+r.Detail] = append(open[r.Activity+" "+r.Detail], f)
		case OpHeal:
			k := r.Activity + " " + r.Detail
			if fs := open[k]; len(fs) > 0 {
				fs[0].healStart, fs[0].healEnd, fs[0].healed = r.Start, r.End, r.Err == ""
				open[k] = fs[1:]
			}
		case "":
			grabs = append(grabs, r)
		}
	}
	sort.Slice(grabs, func(i, j int) bool { return grabs[i].Start < grabs[j].Start })
	first := map[string]int64{} // a key's first click
	var last int64              // the crowd's last new click
	for _, g := range grabs {
		if _, ok := first[g.Key]; !ok || g.Key == "" {
			first[g.Key] = g.Start
			last = max(last, g.Start)
		}
	}
	grace := AvailabilityGrace.Microseconds()
	for _, f := range faults {
		if !f.healed {
			continue
		}
		clear := true // no other strike in force when this one was healed
		next := int64(1<<63 - 1)
		for _, o := range faults {
			if o == f || o.worker {
				continue // a worker struck keeps no grab from an answer: the queue holds them
			}
			if o.start <= f.healEnd && (!o.healed || o.healEnd > f.healEnd) {
				clear = false
			}
			if o.start > f.healEnd {
				next = min(next, o.start)
			}
		}
		deadline := f.healEnd + grace
		if !clear || next < deadline || last <= deadline {
			continue // not alone, or the crowd stopped within the grace: nothing to judge it by
		}
		var asked bool // a grab was in flight in the grace: the promise can be seen
		won := int64(-1)
		refusing := map[int]Record{}
		for _, g := range grabs {
			if g.Start >= next {
				break
			}
			if g.End >= f.healEnd && g.Start <= deadline {
				asked = true
			}
			if g.Outcome == Won && g.End >= f.healEnd && (won < 0 || g.End < won) { // the first answered
				won = g.End
			}
			struck := g.Key != "" && first[g.Key] < f.healEnd // sent again after the fault struck it
			if refusal(g) && g.End < next && (g.Start > deadline && !struck || g.Start > deadline+StruckGrace.Microseconds()) {
				if _, ok := refusing[g.Node]; !ok {
					refusing[g.Node] = g
				}
			}
		}
		if !asked {
			continue
		}
		rep.Heals++
		at := func(t int64) float64 { return float64(t-f.healEnd) / 1e6 }
		if won >= 0 {
			rep.WorstS = max(rep.WorstS, at(won))
		}
		if won < 0 || won > deadline {
			rep.Late++
			when, until := "none before the next strike or the crowd's end", min(next, last)
			if won >= 0 {
				when, until = fmt.Sprintf("the first %.3f s after", at(won)), won
			}
			rep.problem(fmt.Sprintf("%s healed (recovery %.3f s): no 202 within %s; %s%s", f.detail,
				float64(f.healEnd-f.healStart)/1e6, AvailabilityGrace, when, machineDuring(machine, f.healStart, until)))
		}
		for node, g := range refusing {
			rep.Refusing++
			said := ""
			if g.Detail != "" {
				said = " (" + g.Detail + ")"
			}
			rep.problem(fmt.Sprintf("%s healed: node %d still answered %d %s %.3f s after%s%s", f.detail, node, g.Status, g.Code, at(g.Start), said,
				machineDuring(machine, g.Start, g.End)))
		}
	}
	return rep
}

// refusal reports whether a grab was refused without a decision: BUSY, a server error, no answer.
func refusal(r Record) bool {
	return r.Status == http.StatusServiceUnavailable || r.Outcome == Error && (r.Status == 0 || r.Status >= 500)
}

func (a *AvailabilityReport) problem(p string) {
	if len(a.Problems) < 3*maxProblems {
		a.Problems = append(a.Problems, p)
	}
}
