-- The credentials of an `allowlist` sandbox (headers sandboxd adds to its requests to
-- their hosts), as one JSON document sealed with the master key under the sandbox's id,
-- like its environment variables. Read only by the egress proxy; never returned.
CREATE TABLE egress_credentials (
    sandbox_id TEXT PRIMARY KEY,
    sealed BLOB NOT NULL
);
