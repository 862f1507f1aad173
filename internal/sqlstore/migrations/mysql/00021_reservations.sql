-- +goose Up
-- Reservation sales (see the SQLite migration).
ALTER TABLE activities ADD COLUMN reserve_from BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN waves BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN wave_interval_ms BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN wave_order VARCHAR(16) NOT NULL DEFAULT '',
    ADD COLUMN reserved BIGINT NOT NULL DEFAULT 0;
CREATE TABLE reservations (
    activity_id VARCHAR(64) NOT NULL,
    user_id     VARCHAR(64) NOT NULL,
    number      BIGINT NOT NULL,
    reserved_at BIGINT NOT NULL,
    wave        BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (activity_id, user_id),
    UNIQUE KEY reservations_number (activity_id, number),
    CONSTRAINT reservations_activity FOREIGN KEY (activity_id) REFERENCES activities (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE reservations;
ALTER TABLE activities DROP COLUMN reserved, DROP COLUMN wave_order, DROP COLUMN wave_interval_ms, DROP COLUMN waves,
    DROP COLUMN reserve_from;
