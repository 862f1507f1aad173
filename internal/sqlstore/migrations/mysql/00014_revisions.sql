-- +goose Up
-- Revisions of activities (see the SQLite migration).
ALTER TABLE activities ADD COLUMN revision BIGINT NOT NULL DEFAULT 1;

CREATE TABLE activity_revisions (
    activity_id VARCHAR(64) NOT NULL,
    revision    BIGINT NOT NULL,
    add_units   BIGINT NOT NULL,
    reload      BIGINT NOT NULL,
    at_ms       BIGINT NOT NULL,
    given_at    BIGINT NOT NULL,
    PRIMARY KEY (activity_id, revision)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
CREATE INDEX activity_revisions_owed ON activity_revisions (given_at, at_ms);

-- +goose Down
DROP TABLE activity_revisions;
ALTER TABLE activities DROP COLUMN revision;
