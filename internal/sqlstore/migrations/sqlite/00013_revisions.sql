-- +goose Up
-- An activity changed by an operator (stock added, the sale ended early) gets a new revision:
-- the row holds the latest, and activity_revisions records each one until the gate has it
-- (given_at, 0 while it is owed), so that a gate away when the change was made is given it
-- later, in order: add_units more units, or (reload 1: the stock edited before the start) the
-- gate's state made again from the database's.
ALTER TABLE activities ADD COLUMN revision INTEGER NOT NULL DEFAULT 1;

CREATE TABLE activity_revisions (
    activity_id TEXT NOT NULL,
    revision    INTEGER NOT NULL,
    add_units   INTEGER NOT NULL,
    reload      INTEGER NOT NULL,
    at_ms       INTEGER NOT NULL,
    given_at    INTEGER NOT NULL,
    PRIMARY KEY (activity_id, revision)
);
CREATE INDEX activity_revisions_owed ON activity_revisions (given_at, at_ms);

-- +goose Down
DROP TABLE activity_revisions;
ALTER TABLE activities DROP COLUMN revision;
