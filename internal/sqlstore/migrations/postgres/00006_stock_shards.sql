-- +goose Up
-- How many counters an item's stock is split into on Redis Cluster (see sale.Activity).
ALTER TABLE activities ADD COLUMN stock_shards INTEGER NOT NULL DEFAULT 1;

-- +goose Down
ALTER TABLE activities DROP COLUMN stock_shards;
