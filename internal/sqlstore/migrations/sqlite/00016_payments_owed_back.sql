-- +goose Up
-- A signed notice of money taken ends kept or owed back, whatever it names (issue 35).
-- received_cents is what the provider says it took (0 until it says it took anything: the
-- payments settled before are given their amount_cents). refund_reason says why a payment is owed
-- back: order_closed (its order was cancelled before the money came), paid_twice (its order was
-- paid by another payment), amount_mismatch or order_mismatch (the notice named another amount,
-- or another order, than the payment was started for), unknown_payment (a payment id this
-- database never issued). Such a notice may name an order this database does not have (lost
-- with a restore from a backup, say), and is recorded all the same: order_token no longer
-- references orders. SQLite drops a foreign key only by rebuilding the table; nothing
-- references payments, so the foreign keys may stay on while it is.
CREATE TABLE payments_new (
    payment_id     TEXT PRIMARY KEY,
    order_token    TEXT NOT NULL,
    open_token     TEXT UNIQUE,
    activity_id    TEXT NOT NULL,
    user_id        TEXT NOT NULL,
    amount_cents   INTEGER NOT NULL,
    state          TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    received_cents INTEGER NOT NULL DEFAULT 0,
    refund_reason  TEXT NOT NULL DEFAULT ''
);
INSERT INTO payments_new (payment_id, order_token, open_token, activity_id, user_id, amount_cents, state, created_at,
    updated_at, received_cents, refund_reason)
SELECT payment_id, order_token, open_token, activity_id, user_id, amount_cents, state, created_at, updated_at,
    CASE WHEN state IN ('succeeded', 'refund_pending', 'refunded') THEN amount_cents ELSE 0 END,
    CASE WHEN state NOT IN ('refund_pending', 'refunded') THEN ''
         WHEN (SELECT status FROM orders WHERE orders.token = payments.order_token) = 'PAID' THEN 'paid_twice'
         ELSE 'order_closed' END
FROM payments;
DROP TABLE payments;
ALTER TABLE payments_new RENAME TO payments;
CREATE INDEX payments_order ON payments (order_token);
CREATE INDEX payments_state ON payments (state, created_at);

-- +goose Down
-- Refused while a payment names an order the database does not have.
CREATE TABLE payments_old (
    payment_id   TEXT PRIMARY KEY,
    order_token  TEXT NOT NULL REFERENCES orders (token),
    open_token   TEXT UNIQUE,
    activity_id  TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    amount_cents INTEGER NOT NULL,
    state        TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);
INSERT INTO payments_old (payment_id, order_token, open_token, activity_id, user_id, amount_cents, state, created_at, updated_at)
SELECT payment_id, order_token, open_token, activity_id, user_id, amount_cents, state, created_at, updated_at FROM payments;
DROP TABLE payments;
ALTER TABLE payments_old RENAME TO payments;
CREATE INDEX payments_order ON payments (order_token);
CREATE INDEX payments_state ON payments (state, created_at);
