-- +goose Up
-- The blacklist: users and client networks refused with 403 BLOCKED until until_ms (0: until
-- removed). value is a user id or a network in canonical CIDR form.
CREATE TABLE blocks (
    kind       TEXT NOT NULL,
    value      TEXT NOT NULL,
    reason     TEXT NOT NULL,
    until_ms   BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (kind, value)
);

-- +goose Down
DROP TABLE blocks;
