-- +goose Up
-- Reservation sales (预约制): when the reservations open, the waves the reservers enter in and
-- their order, and how many reserved (the counter that numbers them, in the activity's row, so
-- that two reservations at once take two numbers in the order they commit).
ALTER TABLE activities ADD COLUMN reserve_from INTEGER NOT NULL DEFAULT 0;
ALTER TABLE activities ADD COLUMN waves INTEGER NOT NULL DEFAULT 0;
ALTER TABLE activities ADD COLUMN wave_interval_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE activities ADD COLUMN wave_order TEXT NOT NULL DEFAULT '';
ALTER TABLE activities ADD COLUMN reserved INTEGER NOT NULL DEFAULT 0;
-- A buyer's reservation: one per buyer and activity, numbered from 1 in the order of
-- reservation; its wave (from 1) once the reservations close, 0 before.
CREATE TABLE reservations (
    activity_id TEXT NOT NULL REFERENCES activities (id),
    user_id     TEXT NOT NULL,
    number      INTEGER NOT NULL,
    reserved_at INTEGER NOT NULL,
    wave        INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (activity_id, user_id),
    UNIQUE (activity_id, number)
);

-- +goose Down
DROP TABLE reservations;
ALTER TABLE activities DROP COLUMN reserved;
ALTER TABLE activities DROP COLUMN wave_order;
ALTER TABLE activities DROP COLUMN wave_interval_ms;
ALTER TABLE activities DROP COLUMN waves;
ALTER TABLE activities DROP COLUMN reserve_from;
