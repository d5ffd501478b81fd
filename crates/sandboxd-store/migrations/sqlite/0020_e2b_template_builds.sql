-- A built template's ready command (JSON argv): run in each new sandbox after its start
-- command until it succeeds.
ALTER TABLE template_builds ADD COLUMN ready_cmd TEXT;
-- Builds asked for through E2B's API: E2B names a build (build_id, a UUID) and its
-- template before it says what to build. steps is NULL until the steps came (then the
-- build of the same id is in template_builds); it holds, for each of sandboxd's steps,
-- the E2B step it came from (JSON list of strings). tags: JSON list.
CREATE TABLE e2b_builds (
    build_id TEXT PRIMARY KEY,
    template_id TEXT NOT NULL,
    organization_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    name TEXT NOT NULL,
    cpu_milli BIGINT,
    memory_mb BIGINT,
    tags TEXT NOT NULL,
    steps TEXT,
    created_by TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX e2b_builds_organization ON e2b_builds (organization_id, created_at);
-- The files E2B's SDK uploads for its COPY steps: one archive per hash the SDK gives,
-- kept per project (whoever may build there may replace what a build there copies).
CREATE TABLE e2b_build_files (
    project_id TEXT NOT NULL,
    files_hash TEXT NOT NULL,
    organization_id TEXT NOT NULL,
    archive BLOB NOT NULL,
    size BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (project_id, files_hash)
);
CREATE INDEX e2b_build_files_organization ON e2b_build_files (organization_id, created_at);
