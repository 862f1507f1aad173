-- +goose Up
-- The deliveries of an event, found by the event alone (see the SQLite migration).
CREATE INDEX event_deliveries_event ON event_deliveries (event_id);

-- +goose Down
DROP INDEX event_deliveries_event;
