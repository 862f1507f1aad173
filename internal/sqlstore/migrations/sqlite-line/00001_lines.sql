-- +goose Up
-- The embedded mode's waiting lines (queue and lottery admission), in a SQLite file of their own
-- so that a crowd joining a line never waits for the gate's or the worker's writes. A ticket row
-- is written before its join is answered; place is -1 for an early ticket, whose place the draw
-- decides (it is recomputed from the seed and the early tokens, never stored).
CREATE TABLE line_tickets (
    token        TEXT PRIMARY KEY,
    activity_id  TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    place        INTEGER NOT NULL,
    joined_at    INTEGER NOT NULL,
    outcome      TEXT NOT NULL DEFAULT '',
    order_token  TEXT NOT NULL DEFAULT '',
    amount_cents INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX line_tickets_activity ON line_tickets (activity_id);

-- A line's progress: sealed once the early crowd is closed, head the first place not answered.
CREATE TABLE line_states (
    activity_id TEXT PRIMARY KEY,
    sealed      INTEGER NOT NULL,
    head        INTEGER NOT NULL
) WITHOUT ROWID;

-- +goose Down
DROP TABLE line_states;
DROP TABLE line_tickets;
