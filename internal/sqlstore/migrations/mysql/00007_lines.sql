-- +goose Up
-- A queue or lottery activity's line: its cap of waiting tickets, its admissions a second, and
-- the seed of its draw (hex; secret until the draw, see sale.Seed).
ALTER TABLE activities ADD COLUMN queue_cap BIGINT NOT NULL DEFAULT 0;
ALTER TABLE activities ADD COLUMN admit_rate BIGINT NOT NULL DEFAULT 0;
ALTER TABLE activities ADD COLUMN draw_seed VARCHAR(64) NOT NULL DEFAULT '';

-- The embedded line's journal when the embedded gate runs on this database (see the SQLite
-- line journal for what the rows mean).
CREATE TABLE line_tickets (
    seq          BIGINT NOT NULL PRIMARY KEY,
    token        VARCHAR(96) NOT NULL,
    activity_id  VARCHAR(64) NOT NULL,
    user_id      VARCHAR(64) NOT NULL,
    place        BIGINT NOT NULL,
    joined_at    BIGINT NOT NULL,
    outcome      VARCHAR(16) NOT NULL DEFAULT '',
    order_token  VARCHAR(64) NOT NULL DEFAULT '',
    amount_cents BIGINT NOT NULL DEFAULT 0
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE line_states (
    activity_id VARCHAR(64) NOT NULL PRIMARY KEY,
    sealed      INT NOT NULL,
    head        BIGINT NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE line_states;
DROP TABLE line_tickets;
ALTER TABLE activities DROP COLUMN draw_seed;
ALTER TABLE activities DROP COLUMN admit_rate;
ALTER TABLE activities DROP COLUMN queue_cap;
