-- +goose Up
-- Grabs the workers gave up on after too many deliveries: kept for a person to look at, counted
-- in the activity's stats. Their units stay held until someone decides.
CREATE TABLE dead_letters (
    token       TEXT PRIMARY KEY,
    activity_id TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    attempts    INTEGER NOT NULL,
    reason      TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE INDEX dead_letters_activity ON dead_letters (activity_id);

-- +goose Down
DROP TABLE dead_letters;
