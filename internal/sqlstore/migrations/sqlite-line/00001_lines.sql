-- +goose Up
-- The embedded mode's waiting lines (queue and lottery admission), in a SQLite file of their own
-- so that a crowd joining a line never waits for the gate's or the worker's writes. A ticket row
-- is written before its join is answered; place is -1 for an early ticket, whose place the draw
-- decides (it is recomputed from the seed and the early tokens, never stored). Rows are keyed by
-- the process's sequence, so a commit appends to one end of the table instead of dirtying a
-- page per ticket (random tokens as the key made each commit write several times the pages);
-- the line is read whole at start, never looked up by token.
CREATE TABLE line_tickets (
    seq          INTEGER PRIMARY KEY,
    token        TEXT NOT NULL,
    activity_id  TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    place        INTEGER NOT NULL,
    joined_at    INTEGER NOT NULL,
    outcome      TEXT NOT NULL DEFAULT '',
    order_token  TEXT NOT NULL DEFAULT '',
    amount_cents INTEGER NOT NULL DEFAULT 0
);

-- A line's progress: sealed once the early crowd is closed, head the first place not answered.
CREATE TABLE line_states (
    activity_id TEXT PRIMARY KEY,
    sealed      INTEGER NOT NULL,
    head        INTEGER NOT NULL
) WITHOUT ROWID;

-- +goose Down
DROP TABLE line_states;
DROP TABLE line_tickets;
