-- +goose Up
-- When the activity's hot state (the gate's keys, its line, its leaderboard) was archived: dropped
-- once its sale and pay windows were over and its queue drained. 0: live. The database keeps
-- everything; reads of an archived activity answer from here.
ALTER TABLE activities ADD COLUMN archived_at INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE activities DROP COLUMN archived_at;
