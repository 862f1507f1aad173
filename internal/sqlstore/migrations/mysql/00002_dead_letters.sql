-- +goose Up
-- Grabs the workers gave up on after too many deliveries (see the SQLite migration).
CREATE TABLE dead_letters (
    token       VARCHAR(64) NOT NULL PRIMARY KEY,
    activity_id VARCHAR(64) NOT NULL,
    user_id     VARCHAR(64) NOT NULL,
    attempts    BIGINT NOT NULL,
    reason      VARCHAR(255) NOT NULL,
    created_at  BIGINT NOT NULL,
    KEY dead_letters_activity (activity_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE dead_letters;
