-- +goose Up
-- The audit log of admin actions: who (the admin token's name), what (method and route, and the
-- activity or entry named), when (Unix ms), from where (the client address) and the answer's
-- HTTP status. Appended to, never changed.
CREATE TABLE audit_log (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms  INTEGER NOT NULL,
    actor  TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    remote TEXT NOT NULL,
    status INTEGER NOT NULL
);

-- +goose Down
DROP TABLE audit_log;
