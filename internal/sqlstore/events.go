package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"seckill/internal/sale"
)

// EmitTo makes every order change write its event to the outbox, with a delivery to each of
// sinks (the relays' names: a webhook URL, a Kafka topic). Without sinks no event is written:
// events of changes made before a sink was named are not sent to it. Call it before the store is
// used. It leaves the sinks of EmitOnly as they are.
func (s *Store) EmitTo(sinks ...string) {
	s.sinks = append([]string(nil), sinks...)
}

// EmitOnly makes the order changes of types write their events with a delivery to sink too,
// and no other: a relay that acts on a few events (the refunds, on order.refund_requested) costs
// the others nothing. Call it before the store is used.
func (s *Store) EmitOnly(sink string, types ...sale.EventType) {
	if s.only == nil {
		s.only = map[string][]sale.EventType{}
	}
	s.only[sink] = append([]sale.EventType(nil), types...)
}

// sinksOf appends to dst the sinks an event of type t is written for.
func (s *Store) sinksOf(dst []string, t sale.EventType) []string {
	dst = append(dst, s.sinks...)
	for sink, types := range s.only {
		if slices.Contains(types, t) {
			dst = append(dst, sink)
		}
	}
	return dst
}

// emits says whether an event of one of types is written for any sink.
func (s *Store) emits(types ...sale.EventType) bool {
	if len(s.sinks) > 0 {
		return true
	}
	for _, t := range types {
		if len(s.sinksOf(nil, t)) > 0 {
			return true
		}
	}
	return false
}

// maxReason bounds the text kept of a delivery's last error (the MySQL column's size).
const maxReason = 500

// emit writes the events of orders in tx, each with a delivery to every sink that takes it.
// Writing an event twice (a transaction run again) keeps the first.
func (s *Store) emit(ctx context.Context, t tx, all []sale.Event) error {
	var evs []sale.Event
	var deliveries [][]string
	for _, e := range all {
		if sinks := s.sinksOf(nil, e.Type); len(sinks) > 0 {
			evs, deliveries = append(evs, e), append(deliveries, sinks)
		}
	}
	if len(evs) == 0 {
		return nil
	}
	const cols = 16
	args := make([]any, 0, cols*len(evs))
	for _, e := range evs {
		o, w := e.Order, e.Wave
		if w == nil {
			w = &sale.WaveOpening{}
		}
		args = append(args, e.ID, string(e.Type), e.Subject(), o.ID, o.ActivityID, o.UserID, o.AmountCents, string(o.Status),
			truncate(o.Reason, 255), ms(e.At), e.PaymentID, e.ReceivedCents, w.Wave, ms(w.OpensAt), w.Reserved, w.ActivityName)
	}
	// Built per call (a row per event): rewritten without the dialect's cache.
	if _, err := t.Tx.ExecContext(ctx, t.d.rewrite(`INSERT INTO order_events (event_id, type, order_token, order_id, activity_id,
		user_id, amount_cents, status, reason, at_ms, payment_id, payment_cents, wave, opens_at_ms, reserved, activity_name)
		VALUES `+placeholders(len(evs), cols)+t.d.keepFirst("event_id")), args...); err != nil {
		return fmt.Errorf("write %d order events: %w", len(evs), err)
	}
	args, rows := args[:0], 0
	for i, e := range evs {
		for _, sink := range deliveries[i] {
			args = append(args, sink, e.ID, e.Subject(), string(sale.DeliveryPending), ms(e.At))
			rows++
		}
	}
	if _, err := t.Tx.ExecContext(ctx, t.d.rewrite(`INSERT INTO event_deliveries (sink, event_id, order_token, state, next_at,
		attempts, last_error, delivered_at) VALUES `+strings.ReplaceAll(placeholders(rows, 5), "?)", "?, 0, '', 0)")+
		t.d.keepFirst("event_id")), args...); err != nil {
		return fmt.Errorf("write the deliveries of %d order events: %w", len(evs), err)
	}
	return nil
}

// event is the event of type t of order o, at at.
func event(t sale.EventType, o sale.Order, at time.Time) sale.Event {
	return sale.Event{ID: sale.EventID(o.Token, t), Type: t, At: at, Order: o}
}

// paymentEvent is the event of type t of order o, at at, about payment p: a refund event is
// named after its payment, the others after their order.
func paymentEvent(t sale.EventType, o sale.Order, p sale.Payment, at time.Time) sale.Event {
	e := event(t, o, at)
	if t == sale.EventRefundRequested || t == sale.EventRefunded {
		e.ID = sale.PaymentEventID(p.ID, t)
	}
	e.PaymentID, e.ReceivedCents = p.ID, p.ReceivedCents
	return e
}

// placedEvents are the events of a batch's new placements: an order created, or a grab the
// database refused.
func placedEvents(pls []sale.Placement) []sale.Event {
	var evs []sale.Event
	for _, p := range pls {
		switch {
		case !p.New:
		case p.Order.Status == sale.StatusFailed:
			evs = append(evs, event(sale.EventFailed, p.Order, p.Order.ClosedAt))
		default:
			evs = append(evs, event(sale.EventCreated, p.Order, p.Order.CreatedAt))
		}
	}
	return evs
}

const deliveryColumns = `e.seq, e.event_id, e.type, e.order_token, e.order_id, e.activity_id, e.user_id, e.amount_cents,
	e.status, e.reason, e.at_ms, e.payment_id, e.payment_cents, e.wave, e.opens_at_ms, e.reserved, e.activity_name,
	d.sink, d.state, d.attempts, d.next_at, d.last_error, d.delivered_at`

func scanDelivery(row interface{ Scan(...any) error }) (sale.EventDelivery, error) {
	var d sale.EventDelivery
	var typ, status, state string
	var at, next, delivered, opens int64
	var w sale.WaveOpening
	o := &d.Order
	err := row.Scan(&d.Seq, &d.ID, &typ, &o.Token, &o.ID, &o.ActivityID, &o.UserID, &o.AmountCents, &status, &o.Reason, &at,
		&d.PaymentID, &d.ReceivedCents, &w.Wave, &opens, &w.Reserved, &w.ActivityName,
		&d.Sink, &state, &d.Attempts, &next, &d.LastError, &delivered)
	d.Type, o.Status, d.State = sale.EventType(typ), sale.Status(status), sale.DeliveryState(state)
	d.At, d.NextAt, d.DeliveredAt = fromMS(at), fromMS(next), fromMS(delivered)
	if d.Type == sale.EventWaveOpening { // an activity's event: its order_token is its subject
		w.ActivityID, w.OpensAt = o.ActivityID, fromMS(opens)
		d.Wave, o.Token = &w, ""
	}
	return d, err
}

func scanDeliveries(rows *sql.Rows, err error) ([]sale.EventDelivery, error) {
	return collect(rows, err, scanDelivery)
}

// Deliverable implements sale.EventStore. The deliveries are walked in the order they fell due,
// on the index that holds them so (sink, state, next_at), and the read stops at limit: its cost
// is the round's, however long the backlog. Ordered by the events' sequence instead, every
// pending delivery was read and sorted first, and with the relay down a while (its lease running
// out after a worker was killed) a crowd's backlog made each read slower than the crowd, until
// none finished within its deadline and the relay never delivered again (the nemesis's Sentinel
// seed 227; BenchmarkDeliverableBacklog). The round is returned in the order of the events.
func (s *Store) Deliverable(ctx context.Context, sink string, now time.Time, limit int) ([]sale.EventDelivery, error) {
	ds, err := scanDeliveries(s.r.QueryContext(ctx, `SELECT `+deliveryColumns+`
		FROM event_deliveries d JOIN order_events e ON e.event_id = d.event_id
		WHERE d.sink = ? AND d.state = 'pending' AND d.next_at <= ?
		AND NOT EXISTS (SELECT 1 FROM event_deliveries d2 JOIN order_events e2 ON e2.event_id = d2.event_id
			WHERE d2.sink = d.sink AND d2.order_token = d.order_token AND d2.state <> 'delivered' AND e2.seq < e.seq)
		ORDER BY d.next_at LIMIT ?`, sink, ms(now), limit))
	slices.SortFunc(ds, func(a, b sale.EventDelivery) int { return cmp.Compare(a.Seq, b.Seq) })
	return ds, err
}

// Delivered implements sale.EventStore.
func (s *Store) Delivered(ctx context.Context, sink, id string, now time.Time) error {
	_, err := s.w.ExecContext(ctx, `UPDATE event_deliveries SET state = 'delivered', attempts = attempts + 1, delivered_at = ?,
		last_error = '' WHERE sink = ? AND event_id = ?`, ms(now), sink, id)
	return err
}

// Failed implements sale.EventStore.
func (s *Store) Failed(ctx context.Context, sink, id, reason string, next time.Time, park bool) error {
	state := sale.DeliveryPending
	if park {
		state = sale.DeliveryParked
	}
	res, err := s.w.ExecContext(ctx, `UPDATE event_deliveries SET state = ?, attempts = attempts + 1, next_at = ?, last_error = ?
		WHERE sink = ? AND event_id = ? AND state = 'pending'`, string(state), ms(next), truncate(reason, maxReason), sink, id)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return err
	}
	return fmt.Errorf("pending delivery of event %s to %s: %w", id, sink, sale.ErrNotFound)
}

// Deliveries implements sale.EventStore.
func (s *Store) Deliveries(ctx context.Context, f sale.DeliveryFilter) ([]sale.EventDelivery, error) {
	var where []string
	var args []any
	if f.Sink != "" {
		where, args = append(where, "d.sink = ?"), append(args, f.Sink)
	}
	if f.State != "" {
		where, args = append(where, "d.state = ?"), append(args, string(f.State))
	}
	if f.Before > 0 {
		where, args = append(where, "e.seq < ?"), append(args, f.Before)
	}
	q := `SELECT ` + deliveryColumns + ` FROM event_deliveries d JOIN order_events e ON e.event_id = d.event_id`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	return scanDeliveries(s.r.QueryContext(ctx, q+` ORDER BY e.seq DESC, d.sink LIMIT ?`, append(args, f.Limit)...))
}

// Replay implements sale.EventStore.
func (s *Store) Replay(ctx context.Context, sink, id string, now time.Time) (sale.EventDelivery, error) {
	var d sale.EventDelivery
	err := s.inTx(ctx, func(t tx) error {
		if _, err := t.ExecContext(ctx, `UPDATE event_deliveries SET state = 'pending', attempts = 0, next_at = ?, last_error = ''
			WHERE sink = ? AND event_id = ?`, ms(now), sink, id); err != nil {
			return err
		}
		var err error
		d, err = scanDelivery(t.QueryRowContext(ctx, `SELECT `+deliveryColumns+`
			FROM event_deliveries d JOIN order_events e ON e.event_id = d.event_id WHERE d.sink = ? AND d.event_id = ?`, sink, id))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("delivery of event %s to %s: %w", id, sink, sale.ErrNotFound)
		}
		return err
	})
	return d, err
}

// PurgeDelivered implements sale.EventStore. The events are read in the order of writing, on
// the primary key: a call reads at most limit of them however many are stuck behind a pending
// delivery. Which of them every delivery has been delivered by before is read first, then the
// deletes, in one transaction, check it again row by row: a delivery replayed meanwhile is not
// deleted, and its event, which it still names, stays with it.
func (s *Store) PurgeDelivered(ctx context.Context, before time.Time, after int64, limit int) (int, int64, error) {
	cut := ms(before)
	type candidate struct {
		seq, at int64
		id      string
	}
	rows, err := s.r.QueryContext(ctx, `SELECT seq, at_ms, event_id FROM order_events WHERE seq > ? ORDER BY seq LIMIT ?`, after, limit)
	cands, err := collect(rows, err, func(row interface{ Scan(...any) error }) (candidate, error) {
		var c candidate
		return c, row.Scan(&c.seq, &c.at, &c.id)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("purge order events: %w", err)
	}
	var next int64
	if len(cands) == limit {
		next = cands[len(cands)-1].seq
	}
	var ids []any
	for _, c := range cands {
		if c.at > cut { // this one and, but for the nodes' clocks, those written after it are too new
			next = 0
			break
		}
		ids = append(ids, c.id)
	}
	if len(ids) == 0 {
		return 0, next, nil
	}
	in := strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",")
	rows, err = s.r.DB.QueryContext(ctx, s.r.d.rewrite(`SELECT DISTINCT event_id FROM event_deliveries WHERE event_id IN (`+in+`)
		AND (state <> 'delivered' OR delivered_at > ?)`), append(ids, cut)...)
	held, err := collect(rows, err, func(row interface{ Scan(...any) error }) (string, error) {
		var id string
		return id, row.Scan(&id)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("purge order events: %w", err)
	}
	var gone []any
	for _, id := range ids {
		if !slices.Contains(held, id.(string)) {
			gone = append(gone, id)
		}
	}
	if len(gone) == 0 {
		return 0, next, nil
	}
	in = strings.TrimSuffix(strings.Repeat("?,", len(gone)), ",")
	var deleted int64
	err = s.inTx(ctx, func(t tx) error {
		if _, err := t.Tx.ExecContext(ctx, t.d.rewrite(`DELETE FROM event_deliveries WHERE event_id IN (`+in+`)
			AND state = 'delivered' AND delivered_at <= ?`), append(gone, cut)...); err != nil {
			return err
		}
		res, err := t.Tx.ExecContext(ctx, t.d.rewrite(`DELETE FROM order_events WHERE event_id IN (`+in+`)
			AND NOT EXISTS (SELECT 1 FROM event_deliveries d WHERE d.event_id = order_events.event_id)`), gone...)
		if err != nil {
			return err
		}
		deleted, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("purge order events: %w", err)
	}
	return int(deleted), next, nil
}
