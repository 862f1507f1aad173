-- +goose Up
-- Grabs the workers gave up on after too many deliveries (see the SQLite migration).
CREATE TABLE dead_letters (
    token       TEXT PRIMARY KEY,
    activity_id TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    attempts    BIGINT NOT NULL,
    reason      TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);
CREATE INDEX dead_letters_activity ON dead_letters (activity_id);

-- +goose Down
DROP TABLE dead_letters;
