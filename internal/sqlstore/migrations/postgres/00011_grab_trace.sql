-- +goose Up
-- A queued grab's W3C traceparent, for the worker to continue the click's trace ('' when none;
-- see the sqlite-journal migration).
ALTER TABLE grabs ADD COLUMN trace VARCHAR(128) NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE grabs DROP COLUMN trace;
