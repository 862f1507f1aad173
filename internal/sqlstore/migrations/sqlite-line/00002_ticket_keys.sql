-- +goose Up
-- The Idempotency-Key of the join that took a ticket ('' for none). A join sent again with it
-- (its answer was lost) is answered the ticket the first one took, answered or not, so the key
-- must outlive a restart as the ticket does; the line rebuilds its keys from these rows.
ALTER TABLE line_tickets ADD COLUMN idem_key TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE line_tickets DROP COLUMN idem_key;
