package capacity

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"seckill/internal/sale"
)

// WriteJSON writes the plan as one line of JSON.
func (p Plan) WriteJSON(w io.Writer) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// WriteText writes the plan for a person: the costs it used, then what to run.
func (p Plan) WriteText(w io.Writer) error {
	s, c := p.Sale, p.Costs
	ew := &errWriter{w: w}
	ramp := ""
	if s.Ramp > 0 {
		ramp = fmt.Sprintf(" (%s clicks a user over %s)", strconv.FormatFloat(s.Clicks, 'g', -1, 64), s.Ramp)
	}
	peak := s.ramped().Peak
	ew.printf("A sale of %s %s (%s per user) to %s users, at a peak of %s grab requests a second%s.\n",
		group(float64(s.Stock)), unit(s.Kind), group(float64(s.PerUser)), group(float64(s.Users)), group(peak), ramp)
	setup := c.Setup
	if setup == "" {
		setup = "?"
	}
	ew.printf("\nCosts, CPU per unit of work, the median of %d flash and %d all-win bench runs (%s; %s):\n",
		len(c.FlashRuns), len(c.AllWinRuns), orNone(c.Machine), setup)
	ew.printf("  API node      %s a losing grab, %s a winning one\n", micros(c.Loss), micros(c.Win))
	ew.printf("  Redis         %s a grab on the item's master, %s on every Redis process together\n", micros(c.Grab), micros(c.RedisAll))
	ew.printf("  worker node   %s an order (one worker placed %s orders/s in the run)\n", micros(c.Place), group(c.OrdersPerS))
	ew.printf("  database      %s an order\n", micros(c.Write))

	ew.printf("\nThe funnel, with nodes of %d cores planned at %.0f %% of their CPU:\n", s.Cores, 100*s.Headroom)
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  what\thow many\twhy\n")
	fmt.Fprintf(tw, "  API nodes\t%d\t%.1f cores at the peak: %s winning grabs/s and %s others\n",
		p.APINodes, p.APICores, group(p.WinRate), group(peak-p.WinRate))
	shards := "in one counter"
	if p.Shards > 1 {
		shards = fmt.Sprintf("in %d stock shards", p.Shards)
	}
	fmt.Fprintf(tw, "  Redis masters\t%d\t+ %d replica(s) each; the item %s; one master takes %s grabs/s; %.1f Redis cores busy while the stock lasts\n",
		p.Masters, p.Replicas, shards, group(p.MasterRate), p.RedisCores)
	fmt.Fprintf(tw, "  sell-out\t%.2f s\t%s wins at %s a second\n", p.SellS, group(float64(p.Wins)), group(p.WinRate))
	fmt.Fprintf(tw, "  worker nodes\t%d\t%s orders/s each at most, %s together (%.1f cores); the queue empty %.1f s after the sell-out\n",
		p.WorkerNodes, group(p.WorkerRate), group(p.OrderRate), p.WorkerCores, p.DrainS)
	db := fmt.Sprintf("%.1f cores", p.DBCores)
	if c.Write == 0 {
		db = "its CPU not measured"
	}
	fmt.Fprintf(tw, "  database writes\t%s/s\t%s; one transaction per batch of orders, not per order\n", group(p.OrderRate), db)
	fmt.Fprintf(tw, "  rate limits\t\tSECKILL_RATE_NODE=%d SECKILL_RATE_USER=%d SECKILL_RATE_IP=0 (behind a CDN or NAT; 10 when clients come straight in)\n",
		p.RateNode, p.RateUser)
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(p.Notes) > 0 {
		ew.printf("\nWhy:\n")
		for _, n := range p.Notes {
			ew.printf("  - %s\n", n)
		}
	}
	return ew.err
}

// errWriter keeps the first error of a run of writes.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(b)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) { fmt.Fprintf(e, format, args...) }

func unit(k sale.Kind) string {
	if k == sale.KindRedPacket {
		return "red-packet shares"
	}
	return "units"
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// micros writes CPU seconds as microseconds.
func micros(s float64) string { return fmt.Sprintf("%.0f µs", s*1e6) }

// group writes x rounded, its thousands apart: 1,000,000.
func group(x float64) string {
	digits := strconv.FormatFloat(x, 'f', 0, 64)
	neg := strings.HasPrefix(digits, "-")
	digits = strings.TrimPrefix(digits, "-")
	var b strings.Builder
	for i, d := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
