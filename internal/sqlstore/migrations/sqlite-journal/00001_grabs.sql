-- +goose Up
-- The embedded mode's queue, in a SQLite file of its own so that its group commits never wait for
-- the worker's transactions on the main database: each file has its own writer. A row is an
-- acknowledged grab whose order is not placed yet; the worker deletes it once the order is, so
-- the table stays as small as the backlog. (The first answers to idempotency keys live on in the
-- orders.)
CREATE TABLE grabs (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    token        TEXT NOT NULL UNIQUE,
    activity_id  TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    idem_key     TEXT NOT NULL,
    share_idx    INTEGER NOT NULL,
    amount_cents INTEGER NOT NULL,
    grabbed_at   INTEGER NOT NULL
);

-- +goose Down
DROP TABLE grabs;
