-- Pausing: a sandbox may be paused (its container frozen by the engine, processes and
-- memory kept) by a call or, with auto_pause (BIGINT 0/1), at its idle timeout; it is
-- killed after paused_timeout_ms paused (expires_at holds that deadline meanwhile).
ALTER TABLE sandboxes ADD COLUMN auto_pause BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sandboxes ADD COLUMN paused_timeout_ms BIGINT NOT NULL DEFAULT 86400000;
ALTER TABLE sandboxes ADD COLUMN paused_at BIGINT;
