-- Permissions of members, access lists, scoped keys and the audit log.
-- Permission sets are stored as space-separated names (sandboxd_core::access).
ALTER TABLE members ADD COLUMN permissions TEXT NOT NULL DEFAULT '';
-- NULL: the key holds everything its user holds.
ALTER TABLE api_keys ADD COLUMN scopes TEXT;

CREATE TABLE member_projects (
    organization_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    project_id TEXT NOT NULL REFERENCES projects (project_id) ON DELETE CASCADE,
    PRIMARY KEY (organization_id, user_id, project_id),
    FOREIGN KEY (organization_id, user_id) REFERENCES members (organization_id, user_id) ON DELETE CASCADE
);

CREATE TABLE member_sandboxes (
    organization_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    sandbox_id TEXT NOT NULL REFERENCES sandboxes (sandbox_id) ON DELETE CASCADE,
    PRIMARY KEY (organization_id, user_id, sandbox_id),
    FOREIGN KEY (organization_id, user_id) REFERENCES members (organization_id, user_id) ON DELETE CASCADE
);
CREATE INDEX member_sandboxes_sandbox ON member_sandboxes (sandbox_id);

CREATE TABLE audit_log (
    audit_id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL,
    actor_user_id TEXT,
    actor_key_id TEXT,
    action TEXT NOT NULL,
    resource_type TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    resource_name TEXT,
    metadata TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX audit_log_time ON audit_log (organization_id, created_at, audit_id);
CREATE INDEX audit_log_resource ON audit_log (organization_id, resource_id, created_at);
