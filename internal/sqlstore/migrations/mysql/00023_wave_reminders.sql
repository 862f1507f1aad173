-- +goose Up
-- A reservation sale's reminders (see the SQLite migration).
ALTER TABLE activities ADD COLUMN reminded_waves INT NOT NULL DEFAULT 0;
ALTER TABLE order_events ADD COLUMN wave INT NOT NULL DEFAULT 0;
ALTER TABLE order_events ADD COLUMN opens_at_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE order_events ADD COLUMN reserved BIGINT NOT NULL DEFAULT 0;
ALTER TABLE order_events ADD COLUMN activity_name VARCHAR(800) NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE order_events DROP COLUMN activity_name;
ALTER TABLE order_events DROP COLUMN reserved;
ALTER TABLE order_events DROP COLUMN opens_at_ms;
ALTER TABLE order_events DROP COLUMN wave;
ALTER TABLE activities DROP COLUMN reminded_waves;
