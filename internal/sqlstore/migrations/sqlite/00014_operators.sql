-- +goose Up
-- A dead letter keeps its whole grab (what the gate answered), so that an operator can replay
-- it: placed as the worker would have placed it. grabbed_at 0: a dead letter from before, which
-- cannot be replayed. orders_user answers the support desk: a user's orders.
ALTER TABLE dead_letters ADD COLUMN idem_key TEXT NOT NULL DEFAULT '';
ALTER TABLE dead_letters ADD COLUMN share_idx INTEGER NOT NULL DEFAULT 0;
ALTER TABLE dead_letters ADD COLUMN amount_cents INTEGER NOT NULL DEFAULT 0;
ALTER TABLE dead_letters ADD COLUMN grabbed_at INTEGER NOT NULL DEFAULT 0;
CREATE INDEX orders_user ON orders (user_id, id);

-- +goose Down
DROP INDEX orders_user;
ALTER TABLE dead_letters DROP COLUMN grabbed_at;
ALTER TABLE dead_letters DROP COLUMN amount_cents;
ALTER TABLE dead_letters DROP COLUMN share_idx;
ALTER TABLE dead_letters DROP COLUMN idem_key;
