-- +goose Up
-- The provider's own name for a payment (see the SQLite migration).
ALTER TABLE payments ADD COLUMN provider_ref VARCHAR(255) NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE payments DROP COLUMN provider_ref;
