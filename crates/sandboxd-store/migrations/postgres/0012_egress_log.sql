-- What the egress proxy decided for each connection an `allowlist` sandbox's programs
-- asked for. An allowed connection's entry is written when decided and again when it
-- ends (with its bytes): each write gives it a new position, the order readers follow.
-- At most a bounded number of entries is kept per sandbox; they go with its row.
CREATE TABLE egress_log (
    entry_id TEXT PRIMARY KEY,
    sandbox_id TEXT NOT NULL,
    position TEXT NOT NULL,
    at BIGINT NOT NULL,
    host TEXT NOT NULL,
    port BIGINT NOT NULL,
    decision TEXT NOT NULL,
    reason TEXT,
    address TEXT,
    bytes_out BIGINT NOT NULL,
    bytes_in BIGINT NOT NULL,
    ended_at BIGINT,
    unlogged BIGINT NOT NULL
);
CREATE INDEX egress_log_by_position ON egress_log (sandbox_id, position);
