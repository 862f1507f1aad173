package sale

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// EventType is what happened to an order, as the systems downstream (fulfilment, the shop's own
// order service, finance) hear of it.
type EventType string

// The order events. Each happens at most once to an order, but for the refund events, which
// happen at most once to a payment (an order paid twice has one payment to give back).
const (
	EventCreated         EventType = "order.created"
	EventPaid            EventType = "order.paid"
	EventCancelled       EventType = "order.cancelled" // by its buyer, or by an operator
	EventExpired         EventType = "order.expired"   // its payment window closed unpaid
	EventRefundRequested EventType = "order.refund_requested"
	EventRefunded        EventType = "order.refunded"
	EventFailed          EventType = "order.failed" // the database refused the grab: no unit was held
)

// EventWaveOpening is an activity's event, not an order's: a reservation sale's wave opens soon
// (Reservations.RemindDue), so that the shop can remind its reservers. Each wave has one.
const EventWaveOpening EventType = "activity.wave_opening"

// WaveOpening is what an EventWaveOpening says: the activity (its name when the event was
// written), the wave, when it opens and how many reservers enter in it.
type WaveOpening struct {
	ActivityID, ActivityName string
	Wave                     int64
	OpensAt                  time.Time
	Reserved                 int64
}

// WaveOpeningID names the reminder of wave k of activity id.
func WaveOpeningID(id string, k int64) string {
	return fmt.Sprintf("%s.wave_opening.%d", id, k)
}

// ActivitySubject is the key the events of activity id are ordered by, as an order's token keys
// its events: a sink hears of an activity's waves in the order they open.
func ActivitySubject(id string) string { return "activity:" + id }

// Event is one change of an order, kept in the database's outbox (written in the change's own
// transaction) until every sink has it.
type Event struct {
	// Seq is the outbox's number for it, in the order of writing: an order's events are written
	// one transaction after the other, so their Seqs are in the order they happened.
	Seq int64
	// ID is the event's stable name, the same on every delivery of it: a receiver that has seen
	// it may drop it.
	ID    string
	Type  EventType
	At    time.Time
	Order Order // the order as the change left it; of an activity's event, only its ActivityID
	// Wave is what an EventWaveOpening says; nil on an order's event.
	Wave *WaveOpening
	// PaymentID names the payment the change was about (order.paid through a provider, and the
	// refund events); "" for none.
	PaymentID string
	// ReceivedCents is, with PaymentID, what the provider took for that payment: on the refund
	// events what to give back, which is not the order's amount when the provider took another.
	ReceivedCents int64
}

// Subject is what e is about, which a sink hears of in order: the order's token, or for an
// activity's event ActivitySubject.
func (e Event) Subject() string {
	if e.Wave != nil {
		return ActivitySubject(e.Wave.ActivityID)
	}
	return e.Order.Token
}

// EventID names the event of type t of the order token: an order has at most one of each.
func EventID(token string, t EventType) string {
	return token + "." + strings.TrimPrefix(string(t), "order.")
}

// PaymentEventID names the refund event of type t of payment id: a payment has at most one of
// each (payment ids are unique, as order tokens are).
func PaymentEventID(id string, t EventType) string {
	return id + "." + strings.TrimPrefix(string(t), "order.")
}

// DeliveryState is where an event's delivery to one sink stands.
type DeliveryState string

// The states of a delivery.
const (
	DeliveryPending   DeliveryState = "pending"   // to be sent, at NextAt
	DeliveryDelivered DeliveryState = "delivered" // the sink took it
	DeliveryParked    DeliveryState = "parked"    // given up on after too many failures, until replayed
)

// EventDelivery is an event's delivery to one sink (a webhook URL, a Kafka topic).
type EventDelivery struct {
	Event
	Sink        string
	State       DeliveryState
	Attempts    int
	NextAt      time.Time
	LastError   string
	DeliveredAt time.Time
}

// DeliveryFilter selects deliveries to list: of Sink and in State when set, Before a Seq when
// positive (paging back), at most Limit, newest first.
type DeliveryFilter struct {
	Sink   string
	State  DeliveryState
	Before int64
	Limit  int
}

// EventStore is the outbox's side the relay and the admin API use. The events themselves are
// written by the order changes (PlaceOrders, Pay, Cancel), for the sinks the store was opened
// with.
type EventStore interface {
	// Deliverable returns up to limit pending deliveries to sink due by now, those due longest
	// first, in the order their events happened, and at most one per subject (Event.Subject: an
	// order, an activity): the earliest of its events not yet delivered, and none of a subject
	// whose earlier event is parked or not yet due, so that a sink hears of an order's changes
	// in the order they happened. Its cost is the round's, not the backlog's.
	Deliverable(ctx context.Context, sink string, now time.Time, limit int) ([]EventDelivery, error)

	// Delivered records that sink took event id at now.
	Delivered(ctx context.Context, sink, id string, now time.Time) error

	// Failed records a failed attempt to deliver event id to sink: it is tried again at next, or
	// parked when park is set. Errors: ErrNotFound.
	Failed(ctx context.Context, sink, id, reason string, next time.Time, park bool) error

	// Deliveries lists deliveries, newest first.
	Deliveries(ctx context.Context, f DeliveryFilter) ([]EventDelivery, error)

	// Replay makes the delivery of event id to sink pending again, due at now, its attempts
	// forgotten: a parked event, or a delivered one a receiver lost. Errors: ErrNotFound.
	Replay(ctx context.Context, sink, id string, now time.Time) (EventDelivery, error)

	// PurgeDelivered deletes the events that every sink they were written for took at or before
	// before, with their deliveries. It looks at up to limit events written after seq after, in
	// the order of writing, and stops at the first that happened after before. An event with a
	// delivery pending or parked is kept, whether its sink is still configured or not. It
	// returns how many events it deleted and the seq to look after next: 0 when nothing is left
	// to look at.
	PurgeDelivered(ctx context.Context, before time.Time, after int64, limit int) (deleted int, next int64, err error)
}

// Outbox is the order events' outbox as its operators see it: its deliveries, replayed or
// purged. A feature of its own, on its store (the relays, internal/relay, send what it holds).
type Outbox struct {
	store EventStore
	now   func() time.Time
}

// NewOutbox returns the outbox kept by store, on the clock now (nil: time.Now).
func NewOutbox(store EventStore, now func() time.Time) *Outbox {
	if now == nil {
		now = time.Now
	}
	return &Outbox{store: store, now: now}
}

// Deliveries lists the outbox's deliveries, newest first (f.Limit 1 to MaxPage).
// Errors: ErrInvalid, ErrBusy.
func (s *Outbox) Deliveries(ctx context.Context, f DeliveryFilter) ([]EventDelivery, error) {
	if err := checkPage(f.Limit, f.Before, "seq"); err != nil {
		return nil, err
	}
	switch {
	case f.State != "" && f.State != DeliveryPending && f.State != DeliveryDelivered && f.State != DeliveryParked:
		return nil, fmt.Errorf("%w: state must be %s, %s or %s", ErrInvalid, DeliveryPending, DeliveryDelivered, DeliveryParked)
	}
	return s.store.Deliveries(ctx, f)
}

// Replay sends the event id to sink again: a parked delivery, or one a receiver lost. Errors:
// ErrInvalid, ErrNotFound, ErrBusy.
func (s *Outbox) Replay(ctx context.Context, sink, id string) (EventDelivery, error) {
	if sink == "" || id == "" {
		return EventDelivery{}, fmt.Errorf("%w: a replay names the sink and the event_id", ErrInvalid)
	}
	return s.store.Replay(ctx, sink, id, s.now())
}

// PurgeBatch is how many events one PurgeDelivered looks at, each batch a short transaction of
// its own (SQLite has one writer, which the grabs' commits wait for); purgeBatches bounds a
// Purge call, which the next call goes on from.
const (
	PurgeBatch   = 500
	purgeBatches = 200
)

// Purge deletes the order events that every sink they were written for took more than keep
// ago, with their deliveries, oldest first, at most 100,000 a call, and reports how many it
// deleted. An event that some sink has not taken (pending, or parked until an operator replays
// it), or took within keep (a receiver that lost it may be sent it again), stays. A sink dropped
// from the configuration still holds back the events written for it that it never took: no
// node can tell a sink removed for good from one another node still relays.
func (s *Outbox) Purge(ctx context.Context, keep time.Duration) (int, error) {
	if keep <= 0 {
		return 0, nil
	}
	before := s.now().Add(-keep)
	total := 0
	var after int64
	for range purgeBatches {
		n, next, err := s.store.PurgeDelivered(ctx, before, after, PurgeBatch)
		total += n
		if err != nil {
			return total, fmt.Errorf("purge the order events: %w", err)
		}
		if next == 0 {
			break
		}
		after = next
	}
	return total, nil
}
