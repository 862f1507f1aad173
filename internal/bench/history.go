// Package bench is the flash-crowd load generator of `seckill bench` and its independent checker.
// It drives a server only through its HTTP API, keeps a history of every request, and after the
// sale verifies the invariants from that history and from what the API answers about each order,
// not from the server's own counters alone.
package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// Outcome is how one grab request ended, as the client saw it.
type Outcome string

// The outcomes. Error covers everything else: a transport error, a 5xx (the grab may or may not
// have happened) or an unexpected status.
const (
	Won           Outcome = "won"
	AlreadyBought Outcome = "already_bought"
	SoldOut       Outcome = "sold_out"
	RateLimited   Outcome = "rate_limited"
	Error         Outcome = "error"
	// A queue or lottery's joins: a ticket taken (or given back), the line full, a lottery's
	// entries closed at the start.
	Joined    Outcome = "joined"
	QueueFull Outcome = "queue_full"
	Closed    Outcome = "closed"
	// Ended is a grab refused because the sale has ended (403 ENDED): an operator ended it.
	Ended Outcome = "ended"
)

// Outcomes lists the outcomes in report order.
var Outcomes = []Outcome{Won, Joined, AlreadyBought, SoldOut, QueueFull, Closed, Ended, NotReserved, WaveNotOpen, RateLimited, Error}

// outcomeOf classifies an answer by its status.
func outcomeOf(status int) Outcome {
	switch status {
	case http.StatusAccepted:
		return Won
	case http.StatusConflict:
		return AlreadyBought
	case http.StatusGone:
		return SoldOut
	case http.StatusTooManyRequests:
		return RateLimited
	}
	return Error
}

// Record is one line of the history file: one grab request.
type Record struct {
	User string `json:"user"`
	// Intended is when the request was due (ramp arrival; equal to Start in a burst), Start when
	// it was sent and End when its answer arrived, in microseconds since the Unix epoch.
	Intended int64   `json:"intended_us"`
	Start    int64   `json:"start_us"`
	End      int64   `json:"end_us"`
	Outcome  Outcome `json:"outcome"`
	Status   int     `json:"status"` // 0: no HTTP answer
	Code     string  `json:"code,omitempty"`
	Token    string  `json:"order_token,omitempty"`
	Ticket   string  `json:"queue_token,omitempty"` // a queue or lottery's ticket
	Amount   int64   `json:"amount_cents,omitempty"`
	Err      string  `json:"err,omitempty"`
	Node     int     `json:"node"`               // the server (index in the client's list) that answered
	NotSent  bool    `json:"not_sent,omitempty"` // no node took the connection: nothing happened
}

// unanswered reports whether the request may have taken a unit without the client learning so:
// it was sent and got no answer, or a server error.
func (r Record) unanswered() bool {
	return r.Outcome == Error && !r.NotSent && (r.Status == 0 || r.Status >= 500)
}

// WriteHistory writes records as JSON lines.
func WriteHistory(w io.Writer, records []Record) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, r := range records {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ReadHistory reads what WriteHistory wrote.
func ReadHistory(r io.Reader) ([]Record, error) {
	var out []Record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		var rec Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, fmt.Errorf("history line %d: %v", n, err)
		}
		out = append(out, rec)
	}
	return out, sc.Err()
}
