-- Volumes: an organization's named storage on one server (server_id; NULL: the local
-- engine), seen by who sees its project. size_mb is what it reserves against the
-- organization's quota. status: creating (its engine volume not made yet), ready,
-- removing (its engine volume on its way out); only a ready one is mounted.
CREATE TABLE volumes (
    volume_id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    name TEXT NOT NULL,
    server_id TEXT,
    size_mb BIGINT NOT NULL,
    status TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (organization_id, project_id, name)
);
-- The volumes a sandbox mounts (JSON: [{volumeId, path, readOnly}]), kept so that a
-- container made again for it mounts the same.
ALTER TABLE sandboxes ADD COLUMN volumes TEXT NOT NULL DEFAULT '[]';
