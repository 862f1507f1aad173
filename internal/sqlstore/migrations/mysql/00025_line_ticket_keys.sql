-- +goose Up
-- The Idempotency-Key of the join that took a ticket ('' for none): a join sent again with it is
-- answered that ticket (see the SQLite line journal).
ALTER TABLE line_tickets ADD COLUMN idem_key VARCHAR(128) NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE line_tickets DROP COLUMN idem_key;
