-- Sessions of the web dashboard: a browser signs in with an API key once and then holds
-- only a session cookie. Only a hash of the cookie's secret is kept; the session acts
-- for its key as the key stands at each request (revoked: signed out).
CREATE TABLE dashboard_sessions (
    session_hash TEXT PRIMARY KEY,
    key_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX dashboard_sessions_by_key ON dashboard_sessions (key_id, created_at);
