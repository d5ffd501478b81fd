-- Types follow what sqlx's Any driver carries on SQLite and PostgreSQL alike:
-- ids and text as TEXT, times as BIGINT milliseconds since the epoch, secrets as BYTEA.
CREATE TABLE installation (
    singleton BIGINT PRIMARY KEY CHECK (singleton = 1),
    instance_id TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE organizations (
    organization_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE users (
    user_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE members (
    organization_id TEXT NOT NULL REFERENCES organizations (organization_id) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users (user_id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (organization_id, user_id)
);

CREATE TABLE api_keys (
    key_id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    name TEXT NOT NULL,
    prefix TEXT NOT NULL,
    key_hash TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    expires_at BIGINT,
    revoked_at BIGINT,
    FOREIGN KEY (organization_id, user_id) REFERENCES members (organization_id, user_id) ON DELETE CASCADE
);

CREATE TABLE projects (
    project_id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations (organization_id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    description TEXT,
    created_at BIGINT NOT NULL
);
CREATE INDEX projects_organization ON projects (organization_id, created_at);

CREATE TABLE environments (
    environment_id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects (project_id) ON DELETE CASCADE,
    organization_id TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT,
    created_at BIGINT NOT NULL,
    UNIQUE (project_id, name)
);

CREATE TABLE sandboxes (
    sandbox_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    organization_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    environment_id TEXT NOT NULL REFERENCES environments (environment_id) ON DELETE CASCADE,
    server_id TEXT,
    image TEXT NOT NULL,
    template TEXT,
    container_id TEXT,
    status TEXT NOT NULL,
    cpu DOUBLE PRECISION NOT NULL,
    memory_mb BIGINT NOT NULL,
    pids_limit BIGINT NOT NULL,
    timeout_ms BIGINT NOT NULL,
    network_mode TEXT NOT NULL,
    env_vars BYTEA,
    workdir TEXT NOT NULL,
    run_as TEXT,
    runtime TEXT,
    created_by TEXT,
    created_at BIGINT NOT NULL,
    expires_at BIGINT,
    last_activity_at BIGINT,
    killed_at BIGINT
);
CREATE INDEX sandboxes_environment ON sandboxes (environment_id, created_at);
CREATE INDEX sandboxes_project ON sandboxes (project_id, created_at);
CREATE INDEX sandboxes_status_expires ON sandboxes (status, expires_at);
