-- +goose Up
-- A reservation sale's close (see the SQLite migration).
ALTER TABLE activities ADD COLUMN reservations_state SMALLINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE activities DROP COLUMN reservations_state;
