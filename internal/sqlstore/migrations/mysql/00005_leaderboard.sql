-- +goose Up
-- The leaderboard's covering index (see the SQLite migration). MariaDB 10.8+ keeps DESC.
CREATE INDEX orders_leaderboard ON orders (activity_id, amount_cents DESC, created_at, token, status, user_id);

-- +goose Down
DROP INDEX orders_leaderboard ON orders;
