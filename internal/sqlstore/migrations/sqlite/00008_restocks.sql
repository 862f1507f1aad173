-- +goose Up
-- The outbox of restocks: a cancelled order's unit must go back to the stock gate (Redis, or the
-- embedded gate), and the gate is another system that can fail after the cancel has committed.
-- The cancel writes its row here in the same transaction; whoever gives the unit back deletes
-- it, and a loop gives back what is left, until the gate says done.
CREATE TABLE restocks (
    token       TEXT PRIMARY KEY,
    activity_id TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);

-- +goose Down
DROP TABLE restocks;
