-- +goose Up
-- MySQL / MariaDB / TiDB. The same tables as on SQLite; identifiers compare byte for byte
-- (utf8mb4_bin), so user "Alice" is not user "alice" in a unique key. Times are Unix
-- milliseconds and money is int64 cents.
CREATE TABLE activities (
    id                VARCHAR(64) NOT NULL PRIMARY KEY,
    name              VARCHAR(800) NOT NULL,
    kind              VARCHAR(16) NOT NULL,
    stock             BIGINT NOT NULL CHECK (stock > 0),
    price_cents       BIGINT NOT NULL,
    per_user_limit    BIGINT NOT NULL,
    start_at          BIGINT NOT NULL,
    end_at            BIGINT NOT NULL,
    pay_window_ms     BIGINT NOT NULL,
    total_cents       BIGINT NOT NULL,
    require_challenge INT NOT NULL,
    admission         VARCHAR(16) NOT NULL,
    created_at        BIGINT NOT NULL,
    -- Units held by CREATED and PAID orders; only conditional updates change it.
    sold              BIGINT NOT NULL DEFAULT 0,
    CONSTRAINT sold_within_stock CHECK (sold >= 0 AND sold <= stock)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE shares (
    activity_id  VARCHAR(64) NOT NULL,
    idx          BIGINT NOT NULL,
    amount_cents BIGINT NOT NULL CHECK (amount_cents >= 1),
    holder       VARCHAR(64) NULL UNIQUE,
    PRIMARY KEY (activity_id, idx),
    FOREIGN KEY (activity_id) REFERENCES activities (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE orders (
    id           BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    token        VARCHAR(64) NOT NULL UNIQUE,
    activity_id  VARCHAR(64) NOT NULL,
    user_id      VARCHAR(64) NOT NULL,
    idem_key     VARCHAR(128) NOT NULL,
    slot         BIGINT NULL,
    share_idx    BIGINT NOT NULL,
    amount_cents BIGINT NOT NULL,
    status       VARCHAR(16) NOT NULL,
    reason       VARCHAR(255) NOT NULL,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    closed_at    BIGINT NOT NULL DEFAULT 0,
    UNIQUE KEY orders_holder (activity_id, user_id, slot),
    KEY orders_expiry (status, expires_at),
    KEY orders_activity_status (activity_id, status),
    FOREIGN KEY (activity_id) REFERENCES activities (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The queue of the embedded gate when it runs on this database (one node, no Redis).
CREATE TABLE grabs (
    seq          BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    token        VARCHAR(64) NOT NULL UNIQUE,
    activity_id  VARCHAR(64) NOT NULL,
    user_id      VARCHAR(64) NOT NULL,
    idem_key     VARCHAR(128) NOT NULL,
    share_idx    BIGINT NOT NULL,
    amount_cents BIGINT NOT NULL,
    grabbed_at   BIGINT NOT NULL,
    KEY grabs_activity (activity_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE grabs;
DROP TABLE orders;
DROP TABLE shares;
DROP TABLE activities;
