-- +goose Up
-- The deliveries of an event, found by the event alone: the purge of the delivered events
-- (PurgeDelivered) asks whether every sink took each of them, and deleting an event has the
-- foreign key look for deliveries still naming it, which without this index is a scan of every
-- delivery per event. The primary key (sink, event_id) leads with the sink. MySQL made this
-- index for its foreign key already.
CREATE INDEX event_deliveries_event ON event_deliveries (event_id);

-- +goose Down
DROP INDEX event_deliveries_event;
