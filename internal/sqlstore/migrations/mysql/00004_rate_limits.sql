-- +goose Up
-- An activity's own rate limits (see the SQLite migration).
ALTER TABLE activities
    ADD COLUMN rate_user INT NOT NULL DEFAULT 0,
    ADD COLUMN rate_ip INT NOT NULL DEFAULT 0,
    ADD COLUMN rate_global INT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE activities DROP COLUMN rate_global, DROP COLUMN rate_ip, DROP COLUMN rate_user;
