-- +goose Up
-- A signed notice of money taken ends kept or owed back, whatever it names (see the SQLite
-- migration). The foreign key is the one 00013 declared without a name.
ALTER TABLE payments DROP CONSTRAINT payments_order_token_fkey;
ALTER TABLE payments ADD COLUMN received_cents BIGINT NOT NULL DEFAULT 0;
ALTER TABLE payments ADD COLUMN refund_reason TEXT NOT NULL DEFAULT '';
UPDATE payments SET received_cents = amount_cents WHERE state IN ('succeeded', 'refund_pending', 'refunded');
UPDATE payments SET refund_reason = CASE
    WHEN (SELECT status FROM orders WHERE orders.token = payments.order_token) = 'PAID' THEN 'paid_twice'
    ELSE 'order_closed' END
WHERE state IN ('refund_pending', 'refunded');

-- +goose Down
-- Refused while a payment names an order the database does not have.
ALTER TABLE payments DROP COLUMN refund_reason;
ALTER TABLE payments DROP COLUMN received_cents;
ALTER TABLE payments ADD CONSTRAINT payments_order_token_fkey FOREIGN KEY (order_token) REFERENCES orders (token);
