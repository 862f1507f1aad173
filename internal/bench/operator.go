package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"seckill/internal/httpapi/wire"
)

// Operator is what an operator does to the sale while the crowd runs (--operator): the changes
// a shop makes when a sale is hot, each through a node of its own choosing. The checker adds
// that the crowd's answers stay what they were without them (BUSY is counted), that the stock
// counts every unit added, and that no grab sent after the sale was ended wins, on any node.
type Operator struct {
	Steps []Change
}

// Change is one operator's change: made once the share At of the crowd's clicks is answered,
// through node Node (modulo the nodes).
type Change struct {
	Kind string  // "add" (Add units of stock), "rename" or "end"
	At   float64 // in (0, 1)
	Node int
	Add  int64
}

// DefaultOperator is --operator's schedule: 5 units added through the first node, the sale
// renamed through the second, 5 more units through the first, then the sale ended through the
// second.
var DefaultOperator = Operator{Steps: []Change{
	{Kind: "add", At: 0.2, Node: 0, Add: 5},
	{Kind: "rename", At: 0.4, Node: 1},
	{Kind: "add", At: 0.6, Node: 0, Add: 5},
	{Kind: "end", At: 0.8, Node: 1},
}}

// Validate reports a schedule that cannot run.
func (o Operator) Validate() error {
	last := 0.0
	for i, c := range o.Steps {
		switch {
		case c.Kind != "add" && c.Kind != "rename" && c.Kind != "end":
			return fmt.Errorf("operator change %d: %q, want add, rename or end", i+1, c.Kind)
		case c.At <= last || c.At >= 1:
			return fmt.Errorf("operator change %d at %g: the changes come in order, between 0 and 1 exclusive", i+1, c.At)
		case c.Kind == "add" && c.Add < 1:
			return fmt.Errorf("operator change %d adds %d units: want at least 1", i+1, c.Add)
		case c.Kind == "end" && i != len(o.Steps)-1:
			return fmt.Errorf("operator change %d ends the sale: it must be the last", i+1)
		}
		last = c.At
	}
	return nil
}

// OperatorReport is what became of the operator's changes, and of the crowd through them.
type OperatorReport struct {
	Changes []ChangeReport `json:"changes"`
	// Added is the stock the changes made added (answered 200, or 202: the gate given it later).
	Added int64 `json:"added"`
	// Busy counts the crowd's answers 503 BUSY; BusyShare is their share of the crowd's requests.
	Busy      int     `json:"busy"`
	BusyShare float64 `json:"busy_share"`
	// Ended is when the end was answered in force (200; Unix µs; 0: the sale was not ended so);
	// EndMade, that an end was made, in force or pending (202).
	Ended   int64 `json:"ended_us,omitempty"`
	EndMade bool  `json:"end_made,omitempty"`
}

// ChangeReport is one change as the node it was made through answered it.
type ChangeReport struct {
	Kind   string  `json:"kind"`
	Node   int     `json:"node"`
	AtS    float64 `json:"at_s"`   // seconds after the crowd began
	TookS  float64 `json:"took_s"` // until its answer
	Status int     `json:"status"` // 200, 202 (made, pending in the gate), or the error's
	Err    string  `json:"error,omitempty"`
	start  int64   // Unix µs
	end    int64
}

// operate makes the changes of o to activity id, each once its trigger of clicks answered (one
// channel per change, closed by the crowd) has come, in order, until ctx ends.
func (o Operator) operate(ctx context.Context, c *Client, id string, began time.Time, triggers []chan struct{}) *OperatorReport {
	rep := &OperatorReport{}
	for i, ch := range o.Steps {
		select {
		case <-ctx.Done():
			return rep
		case <-triggers[i]:
		}
		start := time.Now()
		status, err := c.change(ctx, ch, id, i)
		r := ChangeReport{Kind: ch.Kind, Node: ch.Node, AtS: start.Sub(began).Seconds(), TookS: time.Since(start).Seconds(),
			Status: status, start: start.UnixMicro(), end: time.Now().UnixMicro()}
		if err != nil {
			r.Status, r.Err = 0, err.Error()
			if ae, ok := err.(*apiError); ok {
				r.Status = ae.Status
			}
		}
		switch {
		case ch.Kind == "add" && made(r.Status):
			rep.Added += ch.Add
		case ch.Kind == "end" && made(r.Status):
			rep.EndMade = true
			if r.Status == http.StatusOK {
				rep.Ended = r.end // a pending end promises nothing of when
			}
		}
		rep.Changes = append(rep.Changes, r)
	}
	return rep
}

// change makes one operator's change through its node, as the admin API's client would, and
// returns the status of a change made: 200 in force, 202 made but not yet taken by the gate.
func (c *Client) change(ctx context.Context, ch Change, id string, n int) (int, error) {
	path := "/api/admin/activities/" + url.PathEscape(id)
	var err error
	switch ch.Kind {
	case "add":
		err = c.doOn(ctx, ch.Node, "POST", path+"/stock", c.admin, wire.AddStockRequest{Add: ch.Add}, http.StatusOK, nil)
	case "rename":
		err = c.doOn(ctx, ch.Node, "PATCH", path, c.admin, wire.EditActivityRequest{Name: new(fmt.Sprintf("renamed by change %d", n+1))}, http.StatusOK, nil)
	default:
		err = c.doOn(ctx, ch.Node, "POST", path+"/end", c.admin, nil, http.StatusOK, nil)
	}
	var ae *apiError
	if errors.As(err, &ae) && ae.Status == http.StatusAccepted {
		return http.StatusAccepted, nil
	}
	if err != nil {
		return 0, err
	}
	return http.StatusOK, nil
}

// made reports whether a change answered status was made: in force (200) or pending (202).
func made(status int) bool { return status == http.StatusOK || status == http.StatusAccepted }

// measure counts the crowd's BUSY answers.
func (r *OperatorReport) measure(history []Record) {
	for _, h := range history {
		if h.Status == http.StatusServiceUnavailable {
			r.Busy++
		}
	}
	if len(history) > 0 {
		r.BusyShare = float64(r.Busy) / float64(len(history))
	}
}

// failed counts the changes not answered 200.
func (r *OperatorReport) failed() int64 {
	n := int64(0)
	for _, c := range r.Changes {
		if !made(c.Status) {
			n++
		}
	}
	return n
}
