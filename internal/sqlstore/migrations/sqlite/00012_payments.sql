-- +goose Up
-- Payments through a provider. payment_id is ours, handed to the provider when the buyer is sent
-- to pay. open_token is the order's token while the payment is started and not settled, NULL
-- after: its unique key lets an order have one open payment at a time, so a second click gets
-- the first payment back. An order's events name the payment they are about (payment_id).
CREATE TABLE payments (
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
CREATE INDEX payments_order ON payments (order_token);
CREATE INDEX payments_state ON payments (state, created_at);

ALTER TABLE order_events ADD COLUMN payment_id TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE order_events DROP COLUMN payment_id;
DROP TABLE payments;
