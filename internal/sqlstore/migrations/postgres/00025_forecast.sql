-- +goose Up
-- The crowd forecast of reservation sales (see the SQLite migration).
ALTER TABLE reservations ADD COLUMN clicked SMALLINT NOT NULL DEFAULT 0;
CREATE TABLE arrivals (
    activity_id TEXT NOT NULL REFERENCES activities (id),
    at_s        BIGINT NOT NULL,
    requests    BIGINT NOT NULL,
    PRIMARY KEY (activity_id, at_s)
);
CREATE TABLE reservation_history (
    activity_id     TEXT PRIMARY KEY REFERENCES activities (id),
    archived_at_ms  BIGINT NOT NULL,
    reserved        BIGINT NOT NULL,
    buyers          BIGINT NOT NULL,
    clicks          BIGINT NOT NULL,
    waves           BIGINT NOT NULL,
    wave_interval_s BIGINT NOT NULL,
    peak_rps        BIGINT NOT NULL,
    peak_factor      DOUBLE PRECISION NOT NULL,
    spread          TEXT NOT NULL
);

-- +goose Down
DROP TABLE reservation_history;
DROP TABLE arrivals;
ALTER TABLE reservations DROP COLUMN clicked;
