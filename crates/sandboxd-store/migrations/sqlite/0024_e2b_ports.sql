-- The ports on the E2B domain of a sandbox created through E2B's API: open to anyone
-- (public) or only with its traffic token, the Host its apps see (mask_host, NULL: the
-- request's own), and the key that created it, which a public port's requests act as
-- (as that key stands). Deleted when the sandbox is killed.
CREATE TABLE e2b_ports (
    sandbox_id TEXT PRIMARY KEY,
    key_id TEXT NOT NULL,
    public INTEGER NOT NULL,
    mask_host TEXT
);
