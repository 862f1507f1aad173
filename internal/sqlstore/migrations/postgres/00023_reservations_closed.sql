-- +goose Up
-- A reservation sale's close: 0 while its reservations are open, 1 once closed (the count of
-- reservers is final: a reservation after is refused, whatever the clock of the node that
-- takes it), 2 once every reservation has its wave.
ALTER TABLE activities ADD COLUMN reservations_state SMALLINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE activities DROP COLUMN reservations_state;
