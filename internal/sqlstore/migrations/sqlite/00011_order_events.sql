-- +goose Up
-- The outbox of order events: every change of an order's status writes its event here in the
-- change's own transaction, and a row per sink (a webhook URL, a Kafka topic) in
-- event_deliveries, which the relay works through: pending until the sink has it (delivered),
-- or parked after too many failures, until an operator replays it. seq is the order of writing:
-- an order's events are written one transaction after the other (its row is locked, or SQLite
-- has one writer), so its events' seqs are in the order they happened. event_id is the event's
-- stable name, the order token and what happened, the same on every retry.
CREATE TABLE order_events (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id     TEXT NOT NULL UNIQUE,
    type         TEXT NOT NULL,
    order_token  TEXT NOT NULL,
    order_id     INTEGER NOT NULL,
    activity_id  TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    amount_cents INTEGER NOT NULL,
    status       TEXT NOT NULL,
    reason       TEXT NOT NULL,
    at_ms        INTEGER NOT NULL
);

CREATE TABLE event_deliveries (
    sink         TEXT NOT NULL,
    event_id     TEXT NOT NULL REFERENCES order_events (event_id),
    order_token  TEXT NOT NULL,
    state        TEXT NOT NULL,
    attempts     INTEGER NOT NULL,
    next_at      INTEGER NOT NULL,
    last_error   TEXT NOT NULL,
    delivered_at INTEGER NOT NULL,
    PRIMARY KEY (sink, event_id)
);
CREATE INDEX event_deliveries_due ON event_deliveries (sink, state, next_at);
CREATE INDEX event_deliveries_order ON event_deliveries (sink, order_token);

-- +goose Down
DROP TABLE event_deliveries;
DROP TABLE order_events;
