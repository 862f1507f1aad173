-- +goose Up
-- A signed notice of money taken ends kept or owed back, whatever it names (see the SQLite
-- migration). The foreign key is the one 00013 declared without a name: MySQL and MariaDB call
-- it payments_ibfk_1, TiDB otherwise, so it is looked up (and none is dropped where there is none).
SET @payments_fk = (SELECT CONSTRAINT_NAME FROM information_schema.REFERENTIAL_CONSTRAINTS
    WHERE CONSTRAINT_SCHEMA = DATABASE() AND TABLE_NAME = 'payments' AND REFERENCED_TABLE_NAME = 'orders' LIMIT 1);
SET @payments_fk_drop = IF(@payments_fk IS NULL, 'DO 0', CONCAT('ALTER TABLE payments DROP FOREIGN KEY `', @payments_fk, '`'));
PREPARE payments_fk_drop FROM @payments_fk_drop;
EXECUTE payments_fk_drop;
DEALLOCATE PREPARE payments_fk_drop;
ALTER TABLE payments ADD COLUMN received_cents BIGINT NOT NULL DEFAULT 0;
ALTER TABLE payments ADD COLUMN refund_reason VARCHAR(32) NOT NULL DEFAULT '';
UPDATE payments SET received_cents = amount_cents WHERE state IN ('succeeded', 'refund_pending', 'refunded');
UPDATE payments SET refund_reason = CASE
    WHEN (SELECT status FROM orders WHERE orders.token = payments.order_token) = 'PAID' THEN 'paid_twice'
    ELSE 'order_closed' END
WHERE state IN ('refund_pending', 'refunded');

-- +goose Down
-- Refused while a payment names an order the database does not have.
ALTER TABLE payments DROP COLUMN refund_reason;
ALTER TABLE payments DROP COLUMN received_cents;
ALTER TABLE payments ADD CONSTRAINT payments_ibfk_1 FOREIGN KEY (order_token) REFERENCES orders (token);
