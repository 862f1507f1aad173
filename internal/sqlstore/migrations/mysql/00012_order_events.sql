-- +goose Up
-- The outbox of order events (see the SQLite migration).
CREATE TABLE order_events (
    seq          BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    event_id     VARCHAR(96) NOT NULL UNIQUE,
    type         VARCHAR(32) NOT NULL,
    order_token  VARCHAR(64) NOT NULL,
    order_id     BIGINT NOT NULL,
    activity_id  VARCHAR(64) NOT NULL,
    user_id      VARCHAR(64) NOT NULL,
    amount_cents BIGINT NOT NULL,
    status       VARCHAR(16) NOT NULL,
    reason       VARCHAR(255) NOT NULL,
    at_ms        BIGINT NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE event_deliveries (
    sink         VARCHAR(255) NOT NULL,
    event_id     VARCHAR(96) NOT NULL,
    order_token  VARCHAR(64) NOT NULL,
    state        VARCHAR(16) NOT NULL,
    attempts     INT NOT NULL,
    next_at      BIGINT NOT NULL,
    last_error   VARCHAR(500) NOT NULL,
    delivered_at BIGINT NOT NULL,
    PRIMARY KEY (sink, event_id),
    KEY event_deliveries_due (sink, state, next_at),
    KEY event_deliveries_order (sink, order_token),
    FOREIGN KEY (event_id) REFERENCES order_events (event_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE event_deliveries;
DROP TABLE order_events;
