-- Remote servers: a Docker engine reached over SSH. The private key is sealed with the
-- server id as associated data; the host key is public and pinned.
CREATE TABLE servers (
    server_id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations (organization_id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    address TEXT NOT NULL,
    port BIGINT NOT NULL,
    ssh_user TEXT NOT NULL,
    private_key BYTEA NOT NULL,
    host_key TEXT,
    docker_socket TEXT NOT NULL,
    remote_dir TEXT NOT NULL,
    -- Millicpus and MiB; NULL: what the engine reports.
    cpu_capacity_milli BIGINT,
    memory_mb_capacity BIGINT,
    created_at BIGINT NOT NULL,
    UNIQUE (organization_id, name)
);

CREATE TABLE member_servers (
    organization_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    server_id TEXT NOT NULL REFERENCES servers (server_id) ON DELETE CASCADE,
    PRIMARY KEY (organization_id, user_id, server_id),
    FOREIGN KEY (organization_id, user_id) REFERENCES members (organization_id, user_id) ON DELETE CASCADE
);
