-- +goose Up
-- The audit log of admin actions (see the SQLite migration).
CREATE TABLE audit_log (
    id     BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    at_ms  BIGINT NOT NULL,
    actor  VARCHAR(64) NOT NULL,
    action VARCHAR(128) NOT NULL,
    target VARCHAR(255) NOT NULL,
    remote VARCHAR(64) NOT NULL,
    status INT NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE audit_log;
