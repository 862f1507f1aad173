-- +goose Up
-- The crowd forecast of reservation sales. While a reservation sale runs, every node adds the
-- grab requests it took per second (arrivals) and marks the reservers who clicked; when the sale
-- is archived, what its crowd did is kept in reservation_history (buyers per reservation, clicks
-- per buyer, how the requests spread after each wave opened), which the forecasts of the later
-- sales fit from, and its arrivals are deleted.
ALTER TABLE reservations ADD COLUMN clicked INTEGER NOT NULL DEFAULT 0;
CREATE TABLE arrivals (
    activity_id TEXT NOT NULL REFERENCES activities (id),
    at_s        INTEGER NOT NULL,
    requests    INTEGER NOT NULL,
    PRIMARY KEY (activity_id, at_s)
);
CREATE TABLE reservation_history (
    activity_id     TEXT PRIMARY KEY REFERENCES activities (id),
    archived_at_ms  INTEGER NOT NULL,
    reserved        INTEGER NOT NULL,
    buyers          INTEGER NOT NULL,
    clicks          INTEGER NOT NULL,
    waves           INTEGER NOT NULL,
    wave_interval_s INTEGER NOT NULL,
    peak_rps        INTEGER NOT NULL,
    peak_factor      REAL NOT NULL,
    spread          TEXT NOT NULL
);

-- +goose Down
DROP TABLE reservation_history;
DROP TABLE arrivals;
ALTER TABLE reservations DROP COLUMN clicked;
