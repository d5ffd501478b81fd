-- A sandbox with fixed_timeout (BIGINT 0/1) ends timeout_ms after it was made or its
-- timeout was last set, whatever it does: activity does not move expires_at (E2B's
-- timeouts). Without it, expires_at follows the last activity (the idle timeout).
ALTER TABLE sandboxes ADD COLUMN fixed_timeout BIGINT NOT NULL DEFAULT 0;
