-- +goose Up
-- An activity's own rate limits, in requests per second, overriding the node's: 0 keeps the
-- node's setting, -1 switches the limit off for this activity.
ALTER TABLE activities ADD COLUMN rate_user INTEGER NOT NULL DEFAULT 0;
ALTER TABLE activities ADD COLUMN rate_ip INTEGER NOT NULL DEFAULT 0;
ALTER TABLE activities ADD COLUMN rate_global INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE activities DROP COLUMN rate_global;
ALTER TABLE activities DROP COLUMN rate_ip;
ALTER TABLE activities DROP COLUMN rate_user;
