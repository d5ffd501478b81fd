-- Requests for a sandbox to reach one more host: made by a key that may use the
-- sandbox, decided (approved: the entry added to its list; or denied) by another key
-- holding egress:decide. They go with the sandbox's row.
CREATE TABLE egress_requests (
    request_id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL,
    sandbox_id TEXT NOT NULL,
    host TEXT NOT NULL,
    reason TEXT,
    status TEXT NOT NULL,
    requested_by_user TEXT NOT NULL,
    requested_by_key TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    decided_at BIGINT,
    decided_by_user TEXT,
    decided_by_key TEXT
);
CREATE INDEX egress_requests_by_organization ON egress_requests (organization_id, created_at);
CREATE INDEX egress_requests_by_sandbox ON egress_requests (sandbox_id, status);
