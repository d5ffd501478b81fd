-- Warm pools kept on a remote server: a JSON object, template name → members to keep
-- ready.
ALTER TABLE servers ADD COLUMN warm_pools TEXT NOT NULL DEFAULT '{}';
