-- +goose Up
-- The provider a payment was started with (see the SQLite migration).
ALTER TABLE payments ADD COLUMN provider TEXT NOT NULL DEFAULT 'signed';

-- +goose Down
ALTER TABLE payments DROP COLUMN provider;
