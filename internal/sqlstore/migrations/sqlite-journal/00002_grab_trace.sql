-- +goose Up
-- A traced grab's W3C traceparent, for the worker to continue the click's trace ('' when none).
ALTER TABLE grabs ADD COLUMN trace TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE grabs DROP COLUMN trace;
