-- +goose Up
-- The leaderboard's covering index: an activity's orders by amount, largest first, then by grab
-- time and token (the tie-break). The top N is a range scan of N entries and a rank a count over
-- the entries above, without touching the table.
CREATE INDEX orders_leaderboard ON orders (activity_id, amount_cents DESC, created_at, token, status, user_id);

-- +goose Down
DROP INDEX orders_leaderboard;
