-- Build contexts streamed as a tar (`template.context`): the files' contents one after
-- the other in chunks, and an index (JSON: each file's place, size, digest and mode, and
-- the links). A context is usable once ready, by builds of its project, until it
-- expires; an unfinished upload's rows go when it expires.
CREATE TABLE template_contexts (
    context_id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    created_by TEXT NOT NULL,
    ready BIGINT NOT NULL,
    files BIGINT NOT NULL,
    bytes BIGINT NOT NULL,
    chunks BIGINT NOT NULL,
    index_json TEXT,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX template_contexts_organization ON template_contexts (organization_id, expires_at);
CREATE INDEX template_contexts_expiry ON template_contexts (expires_at);
CREATE TABLE template_context_chunks (
    context_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (context_id, seq)
);
