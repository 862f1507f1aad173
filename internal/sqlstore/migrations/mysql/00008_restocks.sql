-- +goose Up
-- The outbox of restocks (see the SQLite migration).
CREATE TABLE restocks (
    token       VARCHAR(64) NOT NULL PRIMARY KEY,
    activity_id VARCHAR(64) NOT NULL,
    created_at  BIGINT NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE restocks;
