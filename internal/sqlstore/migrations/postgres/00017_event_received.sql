-- +goose Up
-- An event about a payment says what the provider took for it (with payment_id): on the refund
-- events, what to give back, which is not the order's amount when the provider took another.
-- The events written before were of payments that took their order's amount.
ALTER TABLE order_events ADD COLUMN payment_cents BIGINT NOT NULL DEFAULT 0;
UPDATE order_events SET payment_cents = amount_cents WHERE payment_id <> '';

-- +goose Down
ALTER TABLE order_events DROP COLUMN payment_cents;
