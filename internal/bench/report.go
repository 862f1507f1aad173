package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latency summarises the latencies of some requests, in milliseconds.
type Latency struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
}

// Load summarises how the server took the crowd.
type Load struct {
	Seconds float64 `json:"duration_s"`
	RPS     float64 `json:"rps"`
	All     Latency `json:"all"`
	// Outcomes has the latencies per outcome (only those that occurred).
	Outcomes map[Outcome]Latency `json:"outcomes"`
	// PerSecond is the answers received in each second of the run.
	PerSecond []int64 `json:"per_second"`
	// Timeline cuts the run into about 60 steps of StepS seconds (at least 0.1): the answers
	// received in each and their 99th percentile latency, for the plot.
	Timeline Timeline `json:"timeline"`
}

// Timeline is the run over time in equal steps.
type Timeline struct {
	StepS   float64   `json:"step_s"`
	Answers []int64   `json:"answers"`
	P99     []float64 `json:"p99_ms"`
}

// timelineSteps is about how many steps a timeline has.
const timelineSteps = 60

// maxLatencyUS is the largest latency the histograms track: the client's timeout, with room.
const maxLatencyUS = 120_000_000

// Summarize measures a history. A request's latency runs from when it was due (Intended) to its
// answer, so that in a ramp a server too slow to keep up is charged for the requests that waited
// for a free connection (coordinated omission), not only for the time it spent on them.
func Summarize(history []Record) Load {
	l := Load{Outcomes: map[Outcome]Latency{}}
	if len(history) == 0 {
		return l
	}
	all := hdrhistogram.New(1, maxLatencyUS, 3)
	per := map[Outcome]*hdrhistogram.Histogram{}
	first, last := history[0].Intended, history[0].End
	for _, r := range history {
		first, last = min(first, r.Intended), max(last, r.End)
	}
	l.PerSecond = make([]int64, (last-first)/1_000_000+1)
	stepUS := max((last-first)/timelineSteps/100_000*100_000, 100_000) // a multiple of 0.1 s
	perStep := make([][]int64, (last-first)/stepUS+1)                  // latencies (µs) of the answers of each step
	for _, r := range history {
		h := per[r.Outcome]
		if h == nil {
			h = hdrhistogram.New(1, maxLatencyUS, 3)
			per[r.Outcome] = h
		}
		us := min(max(r.End-r.Intended, 1), maxLatencyUS)
		h.RecordValue(us)
		all.RecordValue(us)
		if r.End >= first {
			l.PerSecond[(r.End-first)/1_000_000]++
			step := (r.End - first) / stepUS
			perStep[step] = append(perStep[step], us)
		}
	}
	l.Timeline = Timeline{StepS: float64(stepUS) / 1e6, Answers: make([]int64, len(perStep)), P99: make([]float64, len(perStep))}
	for i, lat := range perStep {
		if len(lat) > 0 {
			slices.Sort(lat)
			l.Timeline.Answers[i] = int64(len(lat))
			l.Timeline.P99[i] = float64(lat[(len(lat)*99)/100]) / 1000
		}
	}
	l.Seconds = float64(last-first) / 1e6
	if l.Seconds > 0 {
		l.RPS = float64(len(history)) / l.Seconds
	}
	l.All = latencyOf(all)
	for o, h := range per {
		l.Outcomes[o] = latencyOf(h)
	}
	return l
}

func latencyOf(h *hdrhistogram.Histogram) Latency {
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return Latency{Count: h.TotalCount(), P50: ms(h.ValueAtQuantile(50)), P99: ms(h.ValueAtQuantile(99)),
		P999: ms(h.ValueAtQuantile(99.9)), Max: ms(h.Max())}
}

// Result is everything a run reports.
type Result struct {
	Verdict
	Load
	OK       bool   `json:"ok"`
	Activity string `json:"activity"`
	Mode     string `json:"mode"` // "embedded", "redis" or "url"
	History  string `json:"history"`
	// Nodes is how many server processes took the crowd; Fault what was done to them.
	Nodes int          `json:"nodes"`
	Fault *FaultReport `json:"fault,omitempty"`
	// Operator is what became of an operator's changes, and of the crowd through them.
	Operator *OperatorReport `json:"operator,omitempty"`
	// DrainS is how long the queue took to empty after the crowd's last answer: the orders the
	// workers still had to place (after a fault, the backlog it left).
	DrainS float64 `json:"drain_s"`
	// Line is what a queue or lottery run found about its line.
	Line *LineReport `json:"line,omitempty"`
	// Reservation is what a reservation sale's run found about its reservations and waves.
	Reservation *ReservationReport `json:"reservation,omitempty"`
	// CPU is what the processes of each role used (Sale.Meter), Setup what they were.
	CPU   []RoleCPU `json:"cpu,omitempty"`
	Setup *Setup    `json:"setup,omitempty"`
	// Payments is what the simulated payment provider and webhook receiver saw (--payments).
	Payments *PaymentsReport `json:"payments,omitempty"`
}

// Setup is what a run's servers were, so that a figure is compared with its like (seckill plan
// picks the runs measured on the durability settings it is asked to size).
type Setup struct {
	Redis       string   `json:"redis"` // "" (the embedded gate), spawn, spawn:cluster, spawn:sentinel, or given
	DB          string   `json:"db"`    // sqlite, spawn:mariadb, spawn:postgres, or given
	MinReplicas int      `json:"min_replicas"`
	Fsync       string   `json:"fsync,omitempty"` // the appendfsync of a Redis bench started
	Roles       []string `json:"roles,omitempty"` // of the nodes bench started (--spawn)
	InProcess   bool     `json:"in_process"`      // the server ran in bench's own process: its CPU is bench's
}

// faultText says what each kind of fault does.
var faultText = map[string]string{
	"api":               "an API node SIGKILLed and restarted",
	"worker":            "the worker node SIGKILLed and restarted",
	"redis":             "redis-server SIGKILLed and restarted",
	"db":                "the database SIGKILLed, kept down for --fault-for and restarted",
	"redis-failover":    "the master of the sale's slot SIGKILLed, its replica taking over",
	"sentinel-failover": "the Sentinel master SIGKILLed, a replica promoted by the sentinels",
	"reshard":           "the sale's slot migrated to another master, key by key",
	"netem":             "a bad network (--netem) between the node and a dependency for --fault-for",
}

// jsonResult flattens the headline figures the way scripts read them.
type jsonResult struct {
	Result
	P50  float64 `json:"p50_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p999_ms"`
}

// WriteJSON writes the result as one line of JSON.
func (r Result) WriteJSON(w io.Writer) error {
	b, err := json.Marshal(jsonResult{Result: r, P50: r.All.P50, P99: r.All.P99, P999: r.All.P999})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// WriteText writes the result as tables for a person.
func (r Result) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "outcome\trequests\tp50 ms\tp99 ms\tp99.9 ms\tmax ms\t\n")
	for _, o := range Outcomes {
		if lat, ok := r.Outcomes[o]; ok {
			fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t\n", o, lat.Count, lat.P50, lat.P99, lat.P999, lat.Max)
		}
	}
	fmt.Fprintf(tw, "all\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t\n", r.All.Count, r.All.P50, r.All.P99, r.All.P999, r.All.Max)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%d requests in %.2f s: %.0f requests/s (%s mode, %d node(s), activity %s)\n", r.Requests, r.Seconds, r.RPS, r.Mode, r.Nodes, r.Activity)
	if len(r.PerSecond) > 1 {
		fmt.Fprintf(w, "answers per second: %v\n", r.PerSecond)
	}
	fmt.Fprintf(w, "wins %d of stock %d (demand %d, restocked %d, unanswered %d)\n", r.Wins, r.Stock, r.Demand, r.Restocked, r.Unanswered)
	fmt.Fprintf(w, "oversell %d  undersell %d  duplicates %d  lost %d  unreleased %d  shares off %d cents  leaderboard off %d\n",
		r.Oversell, r.Undersell, r.Duplicates, r.Lost, r.Unreleased, r.SharesOff, r.BoardOff)
	if rs := r.Reservation; rs != nil {
		fmt.Fprintf(w, "reservation: %d reserved in %.2f s (%d refused RESERVATIONS_CLOSED); the first unit %.2f s after the start\n",
			rs.Reserved, rs.ReserveS, rs.Closed, rs.OpenS)
		for k, wv := range rs.Waves {
			fmt.Fprintf(w, "  wave %d: %d reserved, %d won\n", k+1, wv.Reserved, wv.Won)
		}
		fmt.Fprintf(w, "strangers refused %d, reservers told to wait while the waves were given %d\n", rs.Strangers, rs.Waited)
		fmt.Fprintf(w, "stranger wins %d  early wins %d  reservers refused %d  numbering off %d  waves off %d\n",
			rs.Stranger, rs.Early, rs.Refused, rs.Numbering, rs.WavesOff)
		for _, p := range rs.Problems {
			fmt.Fprintf(w, "  %s\n", p)
		}
		if f := rs.Forecast; f != nil {
			fmt.Fprintf(w, "forecast (%s, %d sales): %d buyers, %d clicks, a peak of %g/s; the crowd: %d buyers, %d clicks, a peak of %d/s (forecast off by %+.0f %%)\n",
				f.Basis, f.Sales, f.ExpectedBuyers, f.ExpectedClicks, f.ExpectedPeakRPS, f.Buyers, f.Clicks, f.PeakRPS, 100*f.PeakError)
		}
	}
	if l := r.Line; l != nil {
		fmt.Fprintf(w, "%s: %d tickets (%d early, drawn at the start), %d refused QUEUE_FULL (cap %d), %d entries after the start refused\n",
			l.Admission, l.Tickets, l.Early, l.QueueFull, l.Cap, l.Closed)
		fmt.Fprintf(w, "joins answered at %.0f/s; the line answered everyone %.2f s after the start; %d winners (%d more unseen)\n",
			l.JoinRPS, l.AnswerS, l.Winners, l.Unseen)
		fmt.Fprintf(w, "unanswered %d  lost %d  out of order %d  draw off %d  over cap %d  winners off %d  commitment off %d\n",
			l.Unanswered, l.Lost, l.OutOfOrder, l.DrawOff, l.OverCap, l.WinnersOff, l.Commitments)
		if len(l.Problems) > 0 {
			r.Problems = append(r.Problems, l.Problems...)
		}
	} else {
		fmt.Fprintf(w, "queue drained %.2f s after the last answer\n", r.DrainS)
	}
	if r.Fault != nil {
		f := r.Fault
		outage := "no grab won after it"
		if f.OutageS != nil {
			outage = fmt.Sprintf("%.3f s at most without a grab won", *f.OutageS)
		}
		fmt.Fprintf(w, "fault: %s %.2f s into the crowd, back after %.2f s; %s; %d answers BUSY (%.2f %% of the crowd)\n",
			faultText[f.Kind], f.AtS, f.RecoveryS, outage, f.Busy, 100*f.BusyShare)
	}
	if o := r.Operator; o != nil {
		for _, c := range o.Changes {
			res := "done"
			if c.Status != 200 {
				res = fmt.Sprintf("answered %d %s", c.Status, c.Err)
			}
			fmt.Fprintf(w, "operator: %s through node %d %.2f s into the crowd, %s in %.3f s\n", c.Kind, c.Node, c.AtS, res, c.TookS)
		}
		fmt.Fprintf(w, "operator: %d units added; %d answers BUSY (%.2f %% of the crowd); %d grabs sent after the end won; %d changes failed\n",
			o.Added, o.Busy, 100*o.BusyShare, r.AfterEnd, r.ChangesFailed)
	}
	if p := r.Payments; p != nil {
		fmt.Fprintf(w, "payments %d at %s (%d notified late, %d twice, %d after a forged notice): %d kept, %d refunded, %d refunds made by the server\n",
			p.Payments, p.Provider, p.Late, p.Duplicated, p.Forged, p.Kept, p.Refunded, p.RefundsMade)
		fmt.Fprintf(w, "webhooks: %d events in %d posts, every order's in order unless counted below; %d notices unanswered\n",
			p.Events, p.Posts, p.Errors)
		fmt.Fprintf(w, "unsettled payments %d  forged notices accepted %d  refunds off %d  orders with events off %d\n",
			r.Unsettled, r.ForgedAccepted, r.RefundsOff, r.EventsOff)
	}
	for _, c := range r.CPU {
		fmt.Fprintf(w, "cpu %s: %.2f s in the crowd, %.2f s in the drain (%d process(es), the busiest %.2f s)\n",
			c.Role, c.CrowdS, c.DrainS, c.Processes, c.BusiestS)
	}
	if r.History != "" {
		fmt.Fprintf(w, "history: %s\n", r.History)
	}
	if r.OK {
		_, err := fmt.Fprintln(w, "OK: every invariant held")
		return err
	}
	_, err := fmt.Fprintf(w, "VIOLATIONS:\n  %s\n", strings.Join(r.Problems, "\n  "))
	return err
}
