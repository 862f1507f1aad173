-- +goose Up
-- What an activity's amounts are in (ISO 4217, lower case); '' is the shop's own.
ALTER TABLE activities ADD COLUMN currency TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE activities DROP COLUMN currency;
