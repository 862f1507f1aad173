-- +goose Up
-- Payments through a provider (see the SQLite migration).
CREATE TABLE payments (
    payment_id   VARCHAR(64) NOT NULL PRIMARY KEY,
    order_token  VARCHAR(64) NOT NULL,
    open_token   VARCHAR(64) NULL UNIQUE,
    activity_id  VARCHAR(64) NOT NULL,
    user_id      VARCHAR(64) NOT NULL,
    amount_cents BIGINT NOT NULL,
    state        VARCHAR(16) NOT NULL,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    KEY payments_order (order_token),
    KEY payments_state (state, created_at),
    FOREIGN KEY (order_token) REFERENCES orders (token)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

ALTER TABLE order_events ADD COLUMN payment_id VARCHAR(64) NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE order_events DROP COLUMN payment_id;
DROP TABLE payments;
