-- +goose NO TRANSACTION
-- +goose Up
-- The orders' per-user key leads with the user: (user_id, activity_id, slot) instead of
-- (activity_id, user_id, slot). It is as unique, answers the same lookups (both columns are
-- given), and now also the support desk's "a user's orders", so orders_user goes: each new order
-- lands in one b-tree keyed by its user instead of two. Those are the b-trees whose pages an
-- all-win batch dirties one per order, and every dirty page is a 4 KiB frame of the commit's WAL
-- write (docs/BENCHMARKS.md §10). SQLite cannot change a table's constraint in place: the table
-- is rebuilt, its rows copied as they are, with the foreign keys off while it is (payments point
-- at orders; openSQLite turns them on again whatever becomes of this). A large database takes a
-- while at its first start on this version: every order is copied once.
PRAGMA foreign_keys = OFF;
BEGIN;
CREATE TABLE orders_new (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    token        TEXT NOT NULL UNIQUE,
    activity_id  TEXT NOT NULL REFERENCES activities (id),
    user_id      TEXT NOT NULL,
    idem_key     TEXT NOT NULL,
    slot         INTEGER,
    share_idx    INTEGER NOT NULL,
    amount_cents INTEGER NOT NULL,
    status       TEXT NOT NULL,
    reason       TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    closed_at    INTEGER NOT NULL DEFAULT 0,
    UNIQUE (user_id, activity_id, slot)
);
INSERT INTO orders_new (id, token, activity_id, user_id, idem_key, slot, share_idx, amount_cents, status, reason,
    created_at, expires_at, closed_at)
SELECT id, token, activity_id, user_id, idem_key, slot, share_idx, amount_cents, status, reason,
    created_at, expires_at, closed_at FROM orders;
DROP TABLE orders;
ALTER TABLE orders_new RENAME TO orders;
CREATE INDEX orders_expiry ON orders (expires_at) WHERE status = 'CREATED';
CREATE INDEX orders_activity_status ON orders (activity_id, status);
CREATE INDEX orders_leaderboard ON orders (activity_id, amount_cents DESC, created_at, token, status, user_id);
COMMIT;
PRAGMA foreign_keys = ON;

-- +goose Down
PRAGMA foreign_keys = OFF;
BEGIN;
CREATE TABLE orders_old (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    token        TEXT NOT NULL UNIQUE,
    activity_id  TEXT NOT NULL REFERENCES activities (id),
    user_id      TEXT NOT NULL,
    idem_key     TEXT NOT NULL,
    slot         INTEGER,
    share_idx    INTEGER NOT NULL,
    amount_cents INTEGER NOT NULL,
    status       TEXT NOT NULL,
    reason       TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    closed_at    INTEGER NOT NULL DEFAULT 0,
    UNIQUE (activity_id, user_id, slot)
);
INSERT INTO orders_old (id, token, activity_id, user_id, idem_key, slot, share_idx, amount_cents, status, reason,
    created_at, expires_at, closed_at)
SELECT id, token, activity_id, user_id, idem_key, slot, share_idx, amount_cents, status, reason,
    created_at, expires_at, closed_at FROM orders;
DROP TABLE orders;
ALTER TABLE orders_old RENAME TO orders;
CREATE INDEX orders_expiry ON orders (expires_at) WHERE status = 'CREATED';
CREATE INDEX orders_activity_status ON orders (activity_id, status);
CREATE INDEX orders_leaderboard ON orders (activity_id, amount_cents DESC, created_at, token, status, user_id);
CREATE INDEX orders_user ON orders (user_id, id);
COMMIT;
PRAGMA foreign_keys = ON;
