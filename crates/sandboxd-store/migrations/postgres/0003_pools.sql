-- A sandbox claimed from a warm pool was started before its environment variables were
-- known: they are applied to every command instead (BIGINT 0/1).
ALTER TABLE sandboxes ADD COLUMN env_per_exec BIGINT NOT NULL DEFAULT 0;
