-- +goose Up
-- Times are Unix milliseconds and money is int64 cents, the same on every dialect.
CREATE TABLE activities (
    id                TEXT PRIMARY KEY,
    name              TEXT NOT NULL,
    kind              TEXT NOT NULL,
    stock             INTEGER NOT NULL CHECK (stock > 0),
    price_cents       INTEGER NOT NULL,
    per_user_limit    INTEGER NOT NULL,
    start_at          INTEGER NOT NULL,
    end_at            INTEGER NOT NULL,
    pay_window_ms     INTEGER NOT NULL,
    total_cents       INTEGER NOT NULL,
    require_challenge INTEGER NOT NULL,
    admission         TEXT NOT NULL,
    created_at        INTEGER NOT NULL,
    -- Units held by CREATED and PAID orders. Only conditional updates change it: the guard
    -- against oversell that holds whatever the cache says.
    sold              INTEGER NOT NULL DEFAULT 0 CHECK (sold >= 0 AND sold <= stock)
);

-- Red-packet shares, split when the activity is created. holder is the token of the order that
-- holds the share, NULL while it is free.
CREATE TABLE shares (
    activity_id  TEXT NOT NULL REFERENCES activities (id),
    idx          INTEGER NOT NULL,
    amount_cents INTEGER NOT NULL CHECK (amount_cents >= 1),
    holder       TEXT UNIQUE,
    PRIMARY KEY (activity_id, idx)
);

-- slot numbers the units a user holds (1..per_user_limit) and is NULL once the order no longer
-- holds one: the unique key then makes a second unit beyond the limit impossible, and token makes
-- a second order for one grab impossible.
CREATE TABLE orders (
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
CREATE INDEX orders_expiry ON orders (expires_at) WHERE status = 'CREATED';
CREATE INDEX orders_activity_status ON orders (activity_id, status);

-- +goose Down
DROP TABLE orders;
DROP TABLE shares;
DROP TABLE activities;
