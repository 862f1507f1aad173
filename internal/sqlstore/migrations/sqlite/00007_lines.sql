-- +goose Up
-- A queue or lottery activity's line: its cap of waiting tickets, its admissions a second, and
-- the seed of its draw (hex; secret until the draw, see sale.Seed).
ALTER TABLE activities ADD COLUMN queue_cap INTEGER NOT NULL DEFAULT 0;
ALTER TABLE activities ADD COLUMN admit_rate INTEGER NOT NULL DEFAULT 0;
ALTER TABLE activities ADD COLUMN draw_seed TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE activities DROP COLUMN draw_seed;
ALTER TABLE activities DROP COLUMN admit_rate;
ALTER TABLE activities DROP COLUMN queue_cap;
