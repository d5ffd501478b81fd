-- Snapshots: a sandbox's filesystem kept as an image (image) on the server that ran it
-- (server_id; NULL: the local engine), with what sandboxes made from it start with
-- (run_as, workdir, template). size_bytes is what the image adds to the one under it,
-- counted against the organization's quota. No environment of the sandbox is kept.
CREATE TABLE snapshots (
    snapshot_id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    name TEXT NOT NULL,
    sandbox_id TEXT NOT NULL,
    server_id TEXT,
    image TEXT NOT NULL,
    source_image TEXT NOT NULL,
    template TEXT,
    run_as TEXT,
    workdir TEXT NOT NULL,
    size_bytes BIGINT NOT NULL,
    created_by TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX snapshots_by_organization ON snapshots (organization_id, created_at);
