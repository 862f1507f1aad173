-- +goose Up
-- The blacklist (see the SQLite migration).
CREATE TABLE blocks (
    kind       VARCHAR(8) NOT NULL,
    value      VARCHAR(64) NOT NULL,
    reason     VARCHAR(255) NOT NULL,
    until_ms   BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (kind, value)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE blocks;
