-- +goose Up
-- What an activity's amounts are in (see the SQLite migration).
ALTER TABLE activities ADD COLUMN currency VARCHAR(3) NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE activities DROP COLUMN currency;
