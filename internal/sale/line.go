package sale

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Admission by line: the queue and lottery modes.
//
// A grab on such an activity does not go to the gate: the user joins the activity's line and gets
// a ticket. Tickets taken before the start form the early crowd; the line is sealed at the start,
// the early tickets are put in the draw's order (DrawOrder over their tokens with the activity's
// seed, whose commitment was public from the creation), and later tickets queue behind them in the
// order they came (queue mode only: a lottery takes no ticket after the start). One drainer per
// activity then admits tickets from the head of the line to the gate, as grabs like any other, in
// order and at the activity's rate (a lottery's at once). A ticket's outcome is the gate's answer:
// won (with the order's token), sold out, already bought. When the gate has nothing left, every
// ticket still waiting is answered at once: sold out, or in a lottery, not drawn.
//
// Every step is idempotent, so a drainer killed anywhere loses nothing: a ticket is admitted with
// its token as the grab's idempotency key, so admitting it again returns the same grab, and the
// head moves only with the outcomes, atomically, and only from where the drainer found it.

// Outcome is where a ticket stands.
type Outcome string

// The outcomes of a ticket.
const (
	OutcomeWaiting       Outcome = "WAITING"
	OutcomeWon           Outcome = "WON"
	OutcomeSoldOut       Outcome = "SOLD_OUT"
	OutcomeNotDrawn      Outcome = "NOT_DRAWN" // lottery: the stock went to tickets drawn before
	OutcomeAlreadyBought Outcome = "ALREADY_BOUGHT"
	OutcomeEnded         Outcome = "ENDED" // the sale ended with the ticket still waiting
)

// Ticket is a user's place in an activity's line.
type Ticket struct {
	Token      string
	ActivityID string
	UserID     string
	Early      bool      // taken before the line was sealed: placed by the draw
	Place      int64     // 0-based place in the line; -1 while an early ticket awaits the draw
	JoinedAt   time.Time // the node's clock when the ticket was taken
	// Outcome is the gate's answer once the ticket was admitted ("" while waiting, and for a
	// ticket answered by Skip: Line.Ticket leaves that to the Service, which knows the mode).
	Outcome     Outcome
	OrderToken  string // the grab's token when won
	AmountCents int64  // the grab's amount when won
}

// LineState is what a line knows of itself.
type LineState struct {
	Sealed bool  // the early crowd is closed: tickets now queue at the tail
	Drawn  bool  // the early tickets have their places
	Early  int64 // early tickets (final once sealed)
	Placed int64 // places given: early tickets once drawn plus the tail's
	Joined int64 // tickets ever taken
	Head   int64 // places below it are answered
	// Rate is the drainer's measured admissions a second (0 before it has measured any).
	Rate float64
}

// Waiting is the number of tickets not answered yet.
func (s LineState) Waiting() int64 { return s.Joined - s.Head }

// Joined is a line's answer to a join: the ticket, whether this join (or the first one sent
// with its key) took it, and the line's state just after.
type Joined struct {
	Ticket
	Fresh bool
	Line  LineState
}

// JoinRequest asks a line for a ticket.
type JoinRequest struct {
	Activity Activity
	UserID   string
	Token    string // the new ticket's token, if one is taken
	// Key is the click's Idempotency-Key ("" for none): a join sent again with it (its answer was
	// lost) is answered the ticket the first one took, whatever became of the ticket since.
	Key string
	// Lookup asks only for the ticket Key took: nothing is taken, and without one the line
	// answers ErrNotFound.
	Lookup bool
	Now    time.Time
	Tail   bool // after the seal, queue at the tail (queue mode); false refuses with ErrEnded
}

// NewTicketToken returns a new ticket's token for a line of activityID: random, and naming the
// activity, so that any node finds the ticket's line from the token alone.
func NewTicketToken(activityID string) string { return NewToken("q") + "." + activityID }

// TicketActivity returns the activity a ticket token names.
func TicketActivity(token string) (string, bool) {
	i := strings.LastIndexByte(token, '.')
	if i < 0 || len(token) > MaxTicketLen || !ValidID(token[i+1:]) {
		return "", false
	}
	return token[i+1:], true
}

// MaxTicketLen bounds a ticket's token: "q", 24 random characters, "." and an activity id.
const MaxTicketLen = 26 + MaxIDLen

// ErrQueueFull refuses a ticket when the line holds its cap of waiting tickets.
var ErrQueueFull = errors.New("the waiting line is full")

// ErrNotLined refuses a line operation on an activity admitted directly.
var ErrNotLined = fmt.Errorf("%w: the activity admits grabs directly, it has no line", ErrInvalid)

// TicketView is a ticket as its owner sees it.
type TicketView struct {
	Ticket
	Admission Admission
	// Position counts the tickets to be answered up to this one (1: next); 0 once answered or
	// while the early crowd awaits the draw.
	Position int64
	// Wait estimates the time until the ticket is answered, from the drainer's measured rate (the
	// activity's admit rate before it has one) and, before the start, the time left.
	Wait time.Duration
	Line LineState
}

// Join is the grab of a queue or lottery activity: it gives userID a ticket in the line, or the
// ticket the user already has waiting (fresh false). A join with the Idempotency-Key (key) of one
// that took a ticket is answered that ticket again, whatever it came to and whatever the line
// says now (the end, the sold-out flag, the challenge, a pass the first one spent): its first
// answer was lost.
// A pass (the path token of a solved challenge) is spent first, whatever comes next; an activity
// that requires a challenge takes no join without one. Errors: ErrNotFound, ErrNotLined, ErrEnded
// (after the end; a lottery's entries also close at the start), ErrSoldOut,
// ErrChallengeRequired, ErrQueueFull, ErrBusy.
func (l *Lines) Join(ctx context.Context, activityID, userID, key, pass string) (TicketView, bool, error) {
	s := l.core
	a, err := s.Activity(ctx, activityID)
	if err != nil {
		return TicketView{}, false, err
	}
	return s.join(ctx, a, userID, key, pass)
}

// join is Join on a, read already.
func (s *Service) join(ctx context.Context, a Activity, userID, key, pass string) (TicketView, bool, error) {
	if !a.Lined() || s.line == nil {
		return TicketView{}, false, ErrNotLined
	}
	now := s.now()
	closed := !now.Before(a.EndAt) || (a.Admission == AdmitLottery && !now.Before(a.StartAt))
	soldOut := a.Admission == AdmitQueue && s.SoldOut(a.ID)
	if key != "" && (closed || soldOut || pass != "" || a.RequireChallenge) {
		// What would refuse a new join (the end, the sold-out flag, a challenge asked of a click
		// without a pass), or spend a pass again, must not refuse a join sent again: the line is
		// asked first for the ticket its key took. (Otherwise the join itself finds it, in the
		// same step that would take a new one.)
		j, err := s.line.Join(ctx, JoinRequest{Activity: a, UserID: userID, Key: key, Lookup: true, Now: now})
		if err == nil {
			return view(a, j.Ticket, j.Line, now), j.Fresh, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return TicketView{}, false, err
		}
	}
	if closed {
		return TicketView{}, false, ErrEnded
	}
	if soldOut {
		return TicketView{}, false, ErrSoldOut
	}
	switch {
	case len(pass) > MaxPassLen:
		return TicketView{}, false, fmt.Errorf("%w: the path token is not a pass", ErrChallengeRequired)
	case pass != "":
		if err := s.passes.SpendPass(ctx, a, userID, pass, now); err != nil {
			return TicketView{}, false, err
		}
	case a.RequireChallenge:
		return TicketView{}, false, ErrChallengeRequired
	}
	j, err := s.line.Join(ctx, JoinRequest{Activity: a, UserID: userID, Token: NewTicketToken(a.ID), Key: key, Now: now,
		Tail: a.Admission == AdmitQueue})
	if err != nil {
		return TicketView{}, false, err
	}
	return view(a, j.Ticket, j.Line, now), j.Fresh, nil
}

// Ticket returns userID's ticket token. Errors: ErrNotFound (also for another user's ticket),
// ErrBusy.
func (l *Lines) Ticket(ctx context.Context, userID, token string) (TicketView, error) {
	s := l.core
	if _, ok := TicketActivity(token); !ok || s.line == nil {
		return TicketView{}, ErrNotFound
	}
	t, st, err := s.line.Ticket(ctx, token)
	if err != nil {
		return TicketView{}, err
	}
	if t.UserID != userID {
		return TicketView{}, ErrNotFound
	}
	a, err := s.Activity(ctx, t.ActivityID)
	if err != nil {
		return TicketView{}, err
	}
	return view(a, t, st, s.now()), nil
}

// view says where t stands in a line in state st at now.
func view(a Activity, t Ticket, st LineState, now time.Time) TicketView {
	v := TicketView{Ticket: t, Admission: a.Admission, Line: st}
	answered := t.Outcome != "" || (t.Place >= 0 && t.Place < st.Head)
	switch {
	case answered && t.Outcome == "" && a.Admission == AdmitLottery:
		v.Outcome = OutcomeNotDrawn
	case answered && t.Outcome == "":
		v.Outcome = OutcomeSoldOut
	case answered:
	case !now.Before(a.EndAt):
		v.Outcome = OutcomeEnded
	default:
		v.Outcome = OutcomeWaiting
		rate := st.Rate
		if rate <= 0 {
			rate = float64(a.AdmitRate)
		}
		ahead := st.Early / 2 // an early ticket before the draw: half the early crowd, on average
		if t.Place >= 0 {
			v.Position = t.Place - st.Head + 1
			ahead = v.Position
		}
		if a.Admission == AdmitLottery {
			ahead = 0 // drawn at once
		}
		v.Wait = time.Duration(float64(ahead) / rate * float64(time.Second))
		if now.Before(a.StartAt) {
			v.Wait += a.StartAt.Sub(now)
		}
	}
	return v
}

// LineState returns the state of a's line. Errors: ErrNotLined, ErrBusy.
func (l *Lines) LineState(ctx context.Context, a Activity) (LineState, error) {
	s := l.core
	if !a.Lined() || s.line == nil {
		return LineState{}, ErrNotLined
	}
	return s.line.State(ctx, a.ID)
}

// Entries returns the draw's entries of a: its early tickets' tokens, sorted, once the line is
// sealed. With the revealed seed anyone recomputes the early crowd's order (DrawOrder), and in a
// lottery its winners: the first Stock. Errors: ErrNotLined, ErrNotStarted (not sealed yet),
// ErrBusy.
//
// The entries never change once drawn: the node keeps them, sorted, so that a crowd checking the
// draw costs one read of the line, not one each.
func (l *Lines) Entries(ctx context.Context, a Activity) ([]string, error) {
	s := l.core
	if v, ok := s.entries.Load(a.ID); ok {
		return v.([]string), nil
	}
	st, err := l.LineState(ctx, a)
	if err != nil {
		return nil, err
	}
	if !st.Drawn {
		return nil, fmt.Errorf("%w: the draw is at the start", ErrNotStarted)
	}
	tokens, err := s.line.Early(ctx, a.ID)
	if err != nil {
		return nil, err
	}
	slices.Sort(tokens)
	s.entries.Store(a.ID, tokens)
	return tokens, nil
}

func lineStats(a Activity, st LineState) *LineStats {
	ls := &LineStats{Joined: st.Joined, Waiting: st.Waiting(), Answered: st.Head, Early: st.Early, Sealed: st.Sealed,
		DrainRate: st.Rate}
	rate := st.Rate
	if rate <= 0 {
		rate = float64(a.AdmitRate)
	}
	if a.Admission == AdmitQueue {
		ls.WaitS = float64(ls.Waiting) / rate
	}
	return ls
}

// Lines are the waiting lines of queue and lottery activities as their buyers and operators see
// them: a ticket, a line's state, a lottery's entries, the drainer that admits the line to the
// gate. A feature of its own, on the core service's line (which a buyer's click joins, and the
// archive drops).
type Lines struct{ core *Service }

// NewLines returns the lines of core's activities; nil when core has no line.
func NewLines(core *Service) *Lines {
	if core.line == nil {
		return nil
	}
	return &Lines{core: core}
}
