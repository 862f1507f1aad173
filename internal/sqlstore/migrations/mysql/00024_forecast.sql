-- +goose Up
-- The crowd forecast of reservation sales (see the SQLite migration).
ALTER TABLE reservations ADD COLUMN clicked SMALLINT NOT NULL DEFAULT 0;
CREATE TABLE arrivals (
    activity_id VARCHAR(64) NOT NULL,
    at_s        BIGINT NOT NULL,
    requests    BIGINT NOT NULL,
    PRIMARY KEY (activity_id, at_s),
    CONSTRAINT arrivals_activity FOREIGN KEY (activity_id) REFERENCES activities (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
CREATE TABLE reservation_history (
    activity_id     VARCHAR(64) NOT NULL PRIMARY KEY,
    archived_at_ms  BIGINT NOT NULL,
    reserved        BIGINT NOT NULL,
    buyers          BIGINT NOT NULL,
    clicks          BIGINT NOT NULL,
    waves           BIGINT NOT NULL,
    wave_interval_s BIGINT NOT NULL,
    peak_rps        BIGINT NOT NULL,
    peak_factor      DOUBLE NOT NULL,
    spread          VARCHAR(400) NOT NULL,
    CONSTRAINT reservation_history_activity FOREIGN KEY (activity_id) REFERENCES activities (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE reservation_history;
DROP TABLE arrivals;
ALTER TABLE reservations DROP COLUMN clicked;
