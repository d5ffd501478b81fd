-- Which replica holds a sandbox's agent connection: the others forward what needs the
-- agent (terminals, processes, contexts, commands and files) to it.
ALTER TABLE sandboxes ADD COLUMN agent_replica TEXT;

-- The replicas serving this installation: the address the others forward to, and a
-- heartbeat (epoch ms). A replica whose heartbeat is old is taken as gone.
CREATE TABLE replicas (
    replica_id TEXT PRIMARY KEY,
    url TEXT NOT NULL,
    heartbeat_at BIGINT NOT NULL
);

-- Single-use tokens of the WebSockets (browsers cannot set headers), kept as hashes, so
-- that a token issued by one replica is redeemed by whichever the WebSocket reaches.
CREATE TABLE session_tokens (
    token_hash TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL,
    key_id TEXT NOT NULL,
    sandbox_id TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX session_tokens_by_organization ON session_tokens (organization_id, expires_at);
