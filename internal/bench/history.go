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
	"sync"
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

// Record is one line of the history file: one grab request, or, in a nemesis run, one of the
// other things that happened (Op).
type Record struct {
	// Op is what the line records: a grab (empty), or one of the Op* below.
	Op       string `json:"op,omitempty"`
	Activity string `json:"activity,omitempty"` // a nemesis run's: which of its activities
	User     string `json:"user,omitempty"`
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
	// Key is the grab's Idempotency-Key (a click sent again carries its first one's), and
	// RetryAfter the answer's Retry-After in seconds.
	Key        string `json:"key,omitempty"`
	RetryAfter int    `json:"retry_after_s,omitempty"`
	// Detail says what a strike, a heal or an operator's change was ("kill-api 1", "add 10"), or
	// what a node said of a click it refused with a server error (the answer's message: which
	// dependency, and why).
	Detail string `json:"detail,omitempty"`
	// Machine is an OpMachine line's sample of the machine over Start to End.
	Machine *MachineSample `json:"machine,omitempty"`
}

// The other lines of a nemesis run's history. A strike's Start is when it began and End when the
// fault was in force; a heal's Start when the healing began and End when the struck part was back
// (a node listening, a server taking writes): its recovery.
const (
	OpPay    = "pay"
	OpCancel = "cancel"
	OpChange = "change"
	OpStrike = "strike"
	OpHeal   = "heal"
	// OpMachine is a sample of the machine the run shares with the deployment (sampleMachine).
	OpMachine = "machine"
)

// isGrab reports whether r records a grab request.
func (r Record) isGrab() bool { return r.Op == "" }

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

// HistoryWriter streams a history to a file as its requests complete, so that a long run holds
// none of it in memory. It is safe for concurrent use; the first write error is kept and
// returned by Flush, and nothing more is written after it.
type HistoryWriter struct {
	mu  sync.Mutex
	bw  *bufio.Writer
	enc *json.Encoder
	n   int64
	err error
}

// NewHistoryWriter returns a writer of JSON lines to w.
func NewHistoryWriter(w io.Writer) *HistoryWriter {
	bw := bufio.NewWriterSize(w, 64<<10)
	return &HistoryWriter{bw: bw, enc: json.NewEncoder(bw)}
}

// Add writes r.
func (h *HistoryWriter) Add(r Record) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		h.err = h.enc.Encode(r)
		h.n++
	}
}

// Len is how many records were added.
func (h *HistoryWriter) Len() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// Flush writes what is buffered and returns the first error met.
func (h *HistoryWriter) Flush() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		h.err = h.bw.Flush()
	}
	return h.err
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
