-- +goose Up
-- An activity's own rate limits (see the SQLite migration).
ALTER TABLE activities
    ADD COLUMN rate_user INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN rate_ip INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN rate_global INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE activities DROP COLUMN rate_global, DROP COLUMN rate_ip, DROP COLUMN rate_user;
