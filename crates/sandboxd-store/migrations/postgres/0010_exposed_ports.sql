-- Ports of sandboxes reachable without a key: by anyone (public) or with a signed link,
-- until expires_at. A link's token is derived from the master key and the row's nonce,
-- never stored; a new exposure of the port (a new nonce) or its removal ends its links.
-- An exposure acts for the key that made it (key_id), as that key stands.
CREATE TABLE exposed_ports (
    sandbox_id TEXT NOT NULL,
    port BIGINT NOT NULL,
    public BIGINT NOT NULL,
    nonce TEXT NOT NULL,
    key_id TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (sandbox_id, port)
);
