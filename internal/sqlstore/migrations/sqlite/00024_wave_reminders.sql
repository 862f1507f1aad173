-- +goose Up
-- A reservation sale's reminders (activity.wave_opening): the last wave reminded, so that each
-- wave's reminder is written to the outbox once, whichever node's job writes it and however
-- long its event stays there. The event is an activity's, not an order's: its order columns are
-- empty but for activity_id, and it says the wave, when it opens, how many will enter in it and
-- the activity's name when it was written.
ALTER TABLE activities ADD COLUMN reminded_waves INTEGER NOT NULL DEFAULT 0;
ALTER TABLE order_events ADD COLUMN wave INTEGER NOT NULL DEFAULT 0;
ALTER TABLE order_events ADD COLUMN opens_at_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE order_events ADD COLUMN reserved INTEGER NOT NULL DEFAULT 0;
ALTER TABLE order_events ADD COLUMN activity_name TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE order_events DROP COLUMN activity_name;
ALTER TABLE order_events DROP COLUMN reserved;
ALTER TABLE order_events DROP COLUMN opens_at_ms;
ALTER TABLE order_events DROP COLUMN wave;
ALTER TABLE activities DROP COLUMN reminded_waves;
