-- +goose Up
-- Payments through a provider (see the SQLite migration).
CREATE TABLE payments (
    payment_id   TEXT PRIMARY KEY,
    order_token  TEXT NOT NULL REFERENCES orders (token),
    open_token   TEXT UNIQUE,
    activity_id  TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    amount_cents BIGINT NOT NULL,
    state        TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);
CREATE INDEX payments_order ON payments (order_token);
CREATE INDEX payments_state ON payments (state, created_at);

ALTER TABLE order_events ADD COLUMN payment_id TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE order_events DROP COLUMN payment_id;
DROP TABLE payments;
