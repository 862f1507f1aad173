-- +goose Up
-- A dead letter keeps its whole grab (see the SQLite migration).
ALTER TABLE dead_letters ADD COLUMN idem_key VARCHAR(128) NOT NULL DEFAULT '';
ALTER TABLE dead_letters ADD COLUMN share_idx BIGINT NOT NULL DEFAULT 0;
ALTER TABLE dead_letters ADD COLUMN amount_cents BIGINT NOT NULL DEFAULT 0;
ALTER TABLE dead_letters ADD COLUMN grabbed_at BIGINT NOT NULL DEFAULT 0;
CREATE INDEX orders_user ON orders (user_id, id);

-- +goose Down
DROP INDEX orders_user ON orders;
ALTER TABLE dead_letters DROP COLUMN grabbed_at;
ALTER TABLE dead_letters DROP COLUMN amount_cents;
ALTER TABLE dead_letters DROP COLUMN share_idx;
ALTER TABLE dead_letters DROP COLUMN idem_key;
