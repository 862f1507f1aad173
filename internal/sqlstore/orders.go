package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"seckill/internal/sale"
)

const orderColumns = `id, token, activity_id, user_id, idem_key, share_idx, amount_cents, status, reason,
	created_at, expires_at, closed_at`

func scanOrder(row interface{ Scan(...any) error }) (sale.Order, error) {
	var o sale.Order
	var created, expires, closed int64
	err := row.Scan(&o.ID, &o.Token, &o.ActivityID, &o.UserID, &o.IdemKey, &o.Share, &o.AmountCents,
		&o.Status, &o.Reason, &created, &expires, &closed)
	o.CreatedAt, o.ExpiresAt, o.ClosedAt = fromMS(created), fromMS(expires), fromMS(closed)
	return o, err
}

// guard is what placing an order needs to know of its activity.
type guard struct {
	kind   sale.Kind
	limit  int64
	window time.Duration
}

// PlaceOrders implements sale.Store. Every check is a conditional statement that the database
// decides, in one transaction: the grab (a unique token), the user's limit (a free slot in the
// unique key), the unit (sold < stock) and the share (holder IS NULL). The statements are
// prepared once per batch.
func (s *Store) PlaceOrders(ctx context.Context, gs []sale.Grab) ([]sale.Placement, error) {
	out := make([]sale.Placement, 0, len(gs))
	if s.w.stmts != nil {
		// Not fatal: the transaction prepares what is missing, or meets the same failure and
		// reports it.
		_ = s.prepare(ctx, gs)
	}
	err := s.inTx(ctx, func(tx tx) error {
		out = out[:len(gs)]
		p := &placer{tx: tx, guards: map[string]guard{}}
		defer p.close()
		done := make([]bool, len(gs))
		if s.lots {
			if err := p.placeMany(ctx, gs, out, done); err != nil {
				return fmt.Errorf("place %d orders: %w", len(gs), err)
			}
		}
		for i, g := range gs {
			if done[i] {
				continue
			}
			pl, err := p.place(ctx, g, g.At)
			if err != nil {
				return fmt.Errorf("place order %s: %w", g.Token, err)
			}
			out[i] = pl
		}
		if !s.emits(sale.EventCreated, sale.EventFailed) {
			return nil // no events: not even the list of them on the placement path
		}
		return s.emit(ctx, tx, placedEvents(out))
	})
	if err != nil && !errors.Is(err, sale.ErrUnplaceable) && s.w.d.invalid(err) {
		err = fmt.Errorf("%w: %w", sale.ErrUnplaceable, err)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// placer places the orders of one batch, in one transaction.
type placer struct {
	tx     tx
	guards map[string]guard
	stmts  map[string]*sql.Stmt
	owned  []*sql.Stmt // prepared for this transaction alone: closed with it
}

// stmt returns query prepared for the batch's transaction.
func (p *placer) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	return p.prepared(ctx, p.tx.d.q(query))
}

// prepared is stmt for a query written for the dialect already.
func (p *placer) prepared(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := p.stmts[query]; ok {
		return st, nil
	}
	st, owned, err := p.tx.prepared(ctx, query)
	if err != nil {
		return nil, err
	}
	if p.stmts == nil {
		p.stmts = map[string]*sql.Stmt{}
	}
	p.stmts[query] = st
	if owned {
		p.owned = append(p.owned, st)
	}
	return st, nil
}

// exec runs a prepared statement and returns the rows it affected.
func (p *placer) exec(ctx context.Context, query string, args ...any) (int64, error) {
	st, err := p.stmt(ctx, query)
	if err != nil {
		return 0, err
	}
	res, err := st.ExecContext(ctx, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// insert runs a prepared statement and returns the rows it affected and the last id inserted.
func (p *placer) insert(ctx context.Context, query string, args ...any) (n, id int64, err error) {
	if p.tx.d.returning {
		st, err := p.stmt(ctx, query+" RETURNING id")
		if err != nil {
			return 0, 0, err
		}
		switch err := st.QueryRowContext(ctx, args...).Scan(&id); {
		case errors.Is(err, sql.ErrNoRows): // a conflict: nothing inserted
			return 0, 0, nil
		case err != nil:
			return 0, 0, err
		}
		return 1, id, nil
	}
	st, err := p.stmt(ctx, query)
	if err != nil {
		return 0, 0, err
	}
	res, err := st.ExecContext(ctx, args...)
	if err != nil {
		return 0, 0, err
	}
	if n, err = res.RowsAffected(); err != nil || n == 0 {
		return n, 0, err
	}
	id, err = res.LastInsertId()
	return n, id, err
}

// order reads back the order of token.
func (p *placer) order(ctx context.Context, token string) (sale.Order, error) {
	st, err := p.stmt(ctx, `SELECT `+orderColumns+` FROM orders WHERE token = ?`)
	if err != nil {
		return sale.Order{}, err
	}
	o, err := scanOrder(st.QueryRowContext(ctx, token))
	if errors.Is(err, sql.ErrNoRows) {
		return sale.Order{}, fmt.Errorf("order %s: %w", token, sale.ErrNotFound)
	}
	return o, err
}

func (p *placer) close() {
	for _, st := range p.owned {
		st.Close()
	}
}

func (p *placer) guard(ctx context.Context, activityID string) (guard, bool, error) {
	if gd, ok := p.guards[activityID]; ok {
		return gd, true, nil
	}
	var gd guard
	var window int64
	st, err := p.stmt(ctx, readGuard)
	if err != nil {
		return gd, false, err
	}
	err = st.QueryRowContext(ctx, activityID).Scan(&gd.kind, &gd.limit, &window)
	if errors.Is(err, sql.ErrNoRows) {
		return gd, false, nil
	}
	if err != nil {
		return gd, false, err
	}
	gd.window = time.Duration(window) * time.Millisecond
	p.guards[activityID] = gd
	return gd, true, nil
}

// minMany is the fewest new orders of one activity worth the batch path of placeMany.
const minMany = 4

// placeMany places, for each item activity of the batch, the grabs that are plainly new (no
// order has their token) and their buyer's first unit, with a few statements for the whole lot
// instead of two per order: one multi-row INSERT, one read of the ids, and one UPDATE that
// claims all the units at once (unit by unit when the stock cannot cover the lot). It writes
// their placements into out and marks them in done; the others (redeliveries, second
// units, red packets, small lots) are left to place one by one, in the same transaction. Either
// way each order ends as the one-by-one path would have placed it in some order of the batch.
func (p *placer) placeMany(ctx context.Context, gs []sale.Grab, out []sale.Placement, done []bool) error {
	byActivity := map[string][]int{}
	for i, g := range gs {
		byActivity[g.ActivityID] = append(byActivity[g.ActivityID], i)
	}
	for id, idx := range byActivity {
		if len(idx) < minMany {
			continue
		}
		gd, ok, err := p.guard(ctx, id)
		if err != nil {
			return err
		}
		if !ok || gd.kind != sale.KindItem {
			continue
		}
		if err := p.placeLot(ctx, gs, idx, gd, out, done); err != nil {
			return err
		}
	}
	return nil
}

// placeLot is placeMany for the grabs idx of one item activity. The lot is inserted as it
// comes: grabs straight from a gate are new, and a lot with a redelivery in it (an order has its
// token) is met by the unique key, looked up, and inserted again without the redeliveries, which
// go the one-by-one way that reads them back.
func (p *placer) placeLot(ctx context.Context, gs []sale.Grab, idx []int, gd guard, out []sale.Placement, done []bool) error {
	fresh := idx
	ids, err := p.insertLot(ctx, gs, fresh, gd)
	if err != nil {
		return err
	}
	if ids == nil {
		tokens := make([]any, 0, len(idx))
		for _, i := range idx {
			tokens = append(tokens, gs[i].Token)
		}
		placed, err := p.ids(ctx, tokens)
		if err != nil {
			return err
		}
		fresh = nil
		for _, i := range idx {
			if _, ok := placed[gs[i].Token]; !ok {
				fresh = append(fresh, i)
			}
		}
		if len(fresh) < minMany {
			return nil
		}
		if ids, err = p.insertLot(ctx, gs, fresh, gd); err != nil || ids == nil {
			return err // nil, nil: it meets another row still (a buyer's second unit)
		}
	}
	n, err := p.exec(ctx, claimUnits, len(fresh), gs[fresh[0]].ActivityID, len(fresh))
	if err != nil {
		return err
	}
	for _, i := range fresh {
		g := gs[i]
		if n == 0 { // the stock cannot cover the whole lot: claim unit by unit, refusing the rest
			m, err := p.exec(ctx, claimUnit, g.ActivityID)
			if err != nil {
				return err
			}
			if m == 0 {
				pl, err := p.refuse(ctx, g, "no unit left in the database")
				if err != nil {
					return err
				}
				out[i], done[i] = pl, true
				continue
			}
		}
		out[i] = sale.Placement{New: true, Order: sale.Order{
			ID: ids[g.Token], Token: g.Token, ActivityID: g.ActivityID, UserID: g.UserID, IdemKey: g.IdempotencyKey,
			Share: g.Share, AmountCents: g.AmountCents, Status: sale.StatusCreated,
			CreatedAt: fromMS(ms(g.At)), ExpiresAt: fromMS(ms(g.At.Add(gd.window))),
		}}
		done[i] = true
	}
	return nil
}

// insertLot inserts the orders of the grabs lot, all the rows or none, and returns their ids by
// token; nil (and no error) when a row meets another (a buyer's second unit, a grab a racing
// worker placed first, a redelivery), which undoes the statement. Knowing that every row went in
// is what lets the lot claim its units at once.
func (p *placer) insertLot(ctx context.Context, gs []sale.Grab, lot []int, gd guard) (map[string]int64, error) {
	args := make([]any, 0, 8*len(lot))
	tokens := make([]any, 0, len(lot))
	for _, i := range lot {
		g := gs[i]
		args = append(args, g.Token, g.ActivityID, g.UserID, g.IdempotencyKey, g.Share, g.AmountCents, ms(g.At), ms(g.At.Add(gd.window)))
		tokens = append(tokens, g.Token)
	}
	if _, err := p.tx.ExecContext(ctx, `SAVEPOINT lot`); err != nil {
		return nil, err
	}
	var ids map[string]int64
	err := p.insertRows(ctx, insertLotQuery(p.tx.d, len(lot)), args, len(lot), &ids)
	if err != nil {
		if !p.tx.d.unique(err) {
			return nil, err
		}
		_, err := p.tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT lot`)
		return nil, err
	}
	if _, err := p.tx.ExecContext(ctx, `RELEASE SAVEPOINT lot`); err != nil {
		return nil, err
	}
	if ids == nil { // no RETURNING here (MySQL): read them back
		return p.ids(ctx, tokens)
	}
	return ids, nil
}

// insertRows runs the multi-row insert query (written for the dialect); with RETURNING token, id
// it fills *ids with what comes back.
func (p *placer) insertRows(ctx context.Context, query string, args []any, n int, ids *map[string]int64) error {
	st, err := p.prepared(ctx, query)
	if err != nil {
		return err
	}
	if !p.tx.d.returnsAll {
		_, err := st.ExecContext(ctx, args...)
		return err
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	m := make(map[string]int64, n)
	for rows.Next() {
		var tok string
		var id int64
		if err := rows.Scan(&tok, &id); err != nil {
			return err
		}
		m[tok] = id
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	*ids = m
	return nil
}

// ids returns the ids of the orders of tokens, by token.
func (p *placer) ids(ctx context.Context, tokens []any) (map[string]int64, error) {
	query := `SELECT token, id FROM orders WHERE token IN (` + strings.TrimSuffix(strings.Repeat("?, ", len(tokens)), ", ") + `)`
	if p.tx.d == postgresDialect {
		// Not as a cached prepared statement: after five runs PostgreSQL may keep a generic
		// plan of it, made while the orders table was nearly empty, whose cost then grows
		// with the table (BenchmarkPlaceOrders: 51 µs an order over 40 batches, 939 over
		// 120, 1,054 over 300). Planned for its tokens each time: 43, 48 and 55.
		tokens = append([]any{pgx.QueryExecModeExec}, tokens...)
	}
	rows, err := p.tx.Tx.QueryContext(ctx, p.tx.d.rewrite(query), tokens...) // built per call: not cached
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	m := make(map[string]int64, len(tokens))
	for rows.Next() {
		var tok string
		var id int64
		if err := rows.Scan(&tok, &id); err != nil {
			return nil, err
		}
		m[tok] = id
	}
	return m, rows.Err()
}

// insertLotQuery is the multi-row INSERT of n orders of one item activity, written for d; on
// dialects that return every row inserted it returns their tokens and ids. Each batch asks for
// it twice (to prepare it, then to run it): it is built once per row count, up to
// maxStatements rows.
func insertLotQuery(d *dialect, n int) string {
	if q, ok := d.lots.Load(n); ok {
		return q.(string)
	}
	q := buildLotQuery(d, n)
	if n <= maxStatements {
		d.lots.Store(n, q)
	}
	return q
}

func buildLotQuery(d *dialect, n int) string {
	var q strings.Builder
	q.WriteString(`INSERT INTO orders (token, activity_id, user_id, idem_key, slot, share_idx, amount_cents, status, reason, created_at, expires_at) VALUES `)
	for i := range n {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString(`(?, ?, ?, ?, 1, ?, ?, 'CREATED', '', ?, ?)`)
	}
	if d.returnsAll {
		q.WriteString(` RETURNING token, id`)
	}
	return d.rewrite(q.String())
}

// The statements that place an order, besides the INSERTs.
const (
	readGuard  = `SELECT kind, per_user_limit, pay_window_ms FROM activities WHERE id = ?`
	claimUnits = `UPDATE activities SET sold = sold + ? WHERE id = ? AND sold + ? <= stock`
	claimUnit  = `UPDATE activities SET sold = sold + 1 WHERE id = ? AND sold < stock`
	claimShare = `UPDATE shares SET holder = ? WHERE activity_id = ? AND idx = ? AND holder IS NULL`
)

// prepare has the writer prepare, ahead of the transaction, the statements that placing gs
// runs when each grab is a new order: the few single ones, and the multi-row INSERT of each lot
// placeMany will try. The others (a redelivery's lookup, a refusal) are prepared in the
// transaction when it needs them.
func (s *Store) prepare(ctx context.Context, gs []sale.Grab) error {
	d := s.w.d
	one := insertOrder
	if d.returning {
		one += " RETURNING id"
	}
	qs := []string{d.q(readGuard), d.q(one), d.q(claimUnit), d.q(claimShare), d.q(claimUnits)}
	if s.lots {
		n := map[string]int{}
		for _, g := range gs {
			n[g.ActivityID]++
		}
		for _, k := range n {
			if k >= minMany {
				qs = append(qs, insertLotQuery(d, k))
			}
		}
	}
	return s.w.stmts.prepare(ctx, qs...)
}

const insertOrder = `INSERT INTO orders (token, activity_id, user_id, idem_key, slot, share_idx, amount_cents,
	status, reason, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'CREATED', '', ?, ?) ON CONFLICT DO NOTHING`

// place inserts the grab's order in the first free slot of its user, then claims a unit (and a
// share) for it; a claim the database refuses turns the order FAILED in the same transaction.
// The order's payment window opens at opens: the grab's time, but for a dead letter replayed,
// whose buyer could not pay before it was placed.
func (p *placer) place(ctx context.Context, g sale.Grab, opens time.Time) (sale.Placement, error) {
	gd, ok, err := p.guard(ctx, g.ActivityID)
	if err != nil {
		return sale.Placement{}, err
	}
	if !ok {
		// No order can name it (the foreign key): the worker dead-letters it.
		return sale.Placement{}, fmt.Errorf("%w: grab %s: activity %s does not exist", sale.ErrUnplaceable, g.Token, g.ActivityID)
	}
	expires := opens.Add(gd.window)
	placed := false
	var id int64
	for slot := int64(1); slot <= gd.limit && !placed; slot++ {
		n, last, err := p.insert(ctx, insertOrder, g.Token, g.ActivityID, g.UserID, g.IdempotencyKey, slot, g.Share,
			g.AmountCents, ms(g.At), ms(expires))
		if err != nil {
			return sale.Placement{}, err
		}
		placed, id = n == 1, last
		if !placed && slot == 1 {
			// A conflict: the slot is taken, or this grab was placed before (a redelivery).
			if o, err := p.order(ctx, g.Token); err == nil {
				return sale.Placement{Order: o}, nil
			} else if !errors.Is(err, sale.ErrNotFound) {
				return sale.Placement{}, err
			}
		}
	}
	if !placed {
		return p.fail(ctx, g, "the per-user limit is reached in the database")
	}
	n, err := p.exec(ctx, claimUnit, g.ActivityID)
	if err != nil {
		return sale.Placement{}, err
	}
	if n == 0 {
		return p.refuse(ctx, g, "no unit left in the database")
	}
	if gd.kind == sale.KindRedPacket {
		n, err := p.exec(ctx, claimShare,
			g.Token, g.ActivityID, g.Share)
		if err != nil {
			return sale.Placement{}, err
		}
		if n == 0 {
			if _, err := p.exec(ctx, `UPDATE activities SET sold = sold - 1 WHERE id = ?`, g.ActivityID); err != nil {
				return sale.Placement{}, err
			}
			return p.refuse(ctx, g, "the share is taken")
		}
	}
	// What was just inserted, without reading it back.
	return sale.Placement{New: true, Order: sale.Order{
		ID: id, Token: g.Token, ActivityID: g.ActivityID, UserID: g.UserID, IdemKey: g.IdempotencyKey,
		Share: g.Share, AmountCents: g.AmountCents, Status: sale.StatusCreated,
		CreatedAt: fromMS(ms(g.At)), ExpiresAt: fromMS(ms(expires)),
	}}, nil
}

// refuse turns the order just inserted for g into a FAILED order that holds nothing.
func (p *placer) refuse(ctx context.Context, g sale.Grab, reason string) (sale.Placement, error) {
	if _, err := p.exec(ctx, `UPDATE orders SET status = 'FAILED', slot = NULL, reason = ?, closed_at = ?, expires_at = ?
		WHERE token = ?`, reason, ms(g.At), ms(g.At), g.Token); err != nil {
		return sale.Placement{}, err
	}
	o, err := p.order(ctx, g.Token)
	return sale.Placement{Order: o, New: true}, err
}

// fail records a grab the guard refused before any row was written as a FAILED order.
func (p *placer) fail(ctx context.Context, g sale.Grab, reason string) (sale.Placement, error) {
	if _, err := p.exec(ctx, `INSERT INTO orders (token, activity_id, user_id, idem_key, slot, share_idx,
		amount_cents, status, reason, created_at, expires_at, closed_at)
		VALUES (?, ?, ?, ?, NULL, ?, ?, 'FAILED', ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		g.Token, g.ActivityID, g.UserID, g.IdempotencyKey, g.Share, g.AmountCents, reason, ms(g.At), ms(g.At), ms(g.At)); err != nil {
		return sale.Placement{}, err
	}
	o, err := p.order(ctx, g.Token)
	return sale.Placement{Order: o, New: true}, err
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func orderByToken(ctx context.Context, q querier, token string) (sale.Order, error) {
	o, err := scanOrder(q.QueryRowContext(ctx, `SELECT `+orderColumns+` FROM orders WHERE token = ?`, token))
	if errors.Is(err, sql.ErrNoRows) {
		return sale.Order{}, fmt.Errorf("order %s: %w", token, sale.ErrNotFound)
	}
	return o, err
}

// Order implements sale.Store. A grab the workers dead-lettered has no order row: it comes back
// as a FAILED order with the dead letter's reason, so that its buyer is told.
func (s *Store) Order(ctx context.Context, token string) (sale.Order, error) {
	o, err := orderByToken(ctx, s.r, token)
	if !errors.Is(err, sale.ErrNotFound) {
		return o, err
	}
	var at int64
	dead := sale.Order{Token: token, Status: sale.StatusFailed}
	switch err := s.r.QueryRowContext(ctx, `SELECT activity_id, user_id, reason, created_at FROM dead_letters WHERE token = ?`,
		token).Scan(&dead.ActivityID, &dead.UserID, &dead.Reason, &at); {
	case errors.Is(err, sql.ErrNoRows):
		return sale.Order{}, fmt.Errorf("order %s: %w", token, sale.ErrNotFound)
	case err != nil:
		return sale.Order{}, err
	}
	dead.CreatedAt, dead.ClosedAt = fromMS(at), fromMS(at)
	dead.Reason = "dead letter: " + dead.Reason
	return dead, nil
}

// OrderByID implements sale.Store.
func (s *Store) OrderByID(ctx context.Context, id int64) (sale.Order, error) {
	o, err := scanOrder(s.r.QueryRowContext(ctx, `SELECT `+orderColumns+` FROM orders WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return sale.Order{}, fmt.Errorf("order %d: %w", id, sale.ErrNotFound)
	}
	return o, err
}

// Pay implements sale.Store.
func (s *Store) Pay(ctx context.Context, token string, now time.Time) (sale.Order, error) {
	var o sale.Order
	err := s.inTx(ctx, func(tx tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE orders SET status = 'PAID', closed_at = ?
			WHERE token = ? AND status = 'CREATED' AND expires_at > ?`, ms(now), token, ms(now))
		if err != nil {
			return err
		}
		if o, err = orderByToken(ctx, tx, token); err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			if err != nil {
				return err
			}
			return s.emit(ctx, tx, []sale.Event{event(sale.EventPaid, o, now)})
		}
		switch o.Status {
		case sale.StatusPaid:
			return nil
		case sale.StatusCreated:
			return fmt.Errorf("%w: the payment window of order %s has closed", sale.ErrInvalidState, token)
		default:
			return fmt.Errorf("%w: order %s is %s", sale.ErrInvalidState, token, o.Status)
		}
	})
	return o, err
}

// Cancel implements sale.Store. The status transition, the unit and the share go back in one
// transaction, so a unit is returned to the database exactly once per cancelled order.
func (s *Store) Cancel(ctx context.Context, token, reason string, now time.Time) (sale.Order, bool, error) {
	var o sale.Order
	var won bool
	err := s.inTx(ctx, func(tx tx) error {
		won = false
		res, err := tx.ExecContext(ctx, `UPDATE orders SET status = 'CANCELLED', slot = NULL, reason = ?, closed_at = ?
			WHERE token = ? AND status = 'CREATED'`, reason, ms(now), token)
		if err != nil {
			return err
		}
		if o, err = orderByToken(ctx, tx, token); err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			if o.Status == sale.StatusCancelled {
				return nil
			}
			return fmt.Errorf("%w: order %s is %s", sale.ErrInvalidState, token, o.Status)
		}
		won = true
		what := sale.EventCancelled
		if reason == sale.ReasonExpired {
			what = sale.EventExpired
		}
		if err := s.emit(ctx, tx, []sale.Event{event(what, o, now)}); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE activities SET sold = sold - 1 WHERE id = ?`, o.ActivityID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO restocks (token, activity_id, created_at) VALUES (?, ?, ?)`,
			o.Token, o.ActivityID, ms(now)); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE shares SET holder = NULL WHERE activity_id = ? AND idx = ? AND holder = ?`,
			o.ActivityID, o.Share, o.Token)
		return err
	})
	if err != nil {
		return o, false, err
	}
	return o, won, nil
}

// Unreleased implements sale.Store.
func (s *Store) Unreleased(ctx context.Context, limit int) ([]sale.Order, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT token FROM restocks ORDER BY created_at, token LIMIT ?`, limit)
	if err != nil {
		return nil, err
	}
	var tokens []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			rows.Close()
			return nil, err
		}
		tokens = append(tokens, t)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	out := make([]sale.Order, 0, len(tokens))
	for _, t := range tokens { // a handful: restocks are owed only while the gate is away
		o, err := orderByToken(ctx, s.r, t)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// Released implements sale.Store.
func (s *Store) Released(ctx context.Context, token string) error {
	_, err := s.w.ExecContext(ctx, `DELETE FROM restocks WHERE token = ?`, token)
	return err
}

// Expired implements sale.Store.
func (s *Store) Expired(ctx context.Context, now time.Time, limit int) ([]sale.Order, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+orderColumns+` FROM orders
		WHERE status = 'CREATED' AND expires_at <= ? ORDER BY expires_at LIMIT ?`, ms(now), limit)
	return collect(rows, err, scanOrder)
}

// Counts implements sale.Store.
func (s *Store) Counts(ctx context.Context, activityID string) (sale.Counts, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT status, COUNT(*), SUM(CASE WHEN reason = ? THEN 1 ELSE 0 END)
		FROM orders WHERE activity_id = ? GROUP BY status`, sale.ReasonExpired, activityID)
	if err != nil {
		return sale.Counts{}, err
	}
	defer rows.Close()
	var c sale.Counts
	for rows.Next() {
		var st sale.Status
		var n, expired int64
		if err := rows.Scan(&st, &n, &expired); err != nil {
			return c, err
		}
		c.Orders += n
		switch st {
		case sale.StatusCreated:
			c.Created = n
		case sale.StatusPaid:
			c.Paid = n
		case sale.StatusCancelled:
			c.Cancelled, c.Expired = n, expired
		case sale.StatusFailed:
			c.Failed = n
		case sale.StatusRefundPending:
			c.RefundPending = n
		case sale.StatusRefunded:
			c.Refunded = n
		}
	}
	if err := rows.Err(); err != nil {
		return c, err
	}
	err = s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM dead_letters WHERE activity_id = ?`, activityID).Scan(&c.DeadLetters)
	return c, err
}

// DeadLetter implements sale.Store.
func (s *Store) DeadLetter(ctx context.Context, g sale.Grab, attempts int, reason string, now time.Time) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO dead_letters (token, activity_id, user_id, attempts, reason, created_at,
		idem_key, share_idx, amount_cents, grabbed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		g.Token, g.ActivityID, g.UserID, attempts, truncate(reason, 255), ms(now), g.IdempotencyKey, g.Share, g.AmountCents, ms(g.At))
	return err
}
