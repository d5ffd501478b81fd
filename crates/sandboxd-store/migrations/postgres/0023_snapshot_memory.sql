-- A snapshot taken with its sandbox's processes: the bytes of their memory kept on the
-- engine's host, and the agent key the saved agent holds (taken once by a sandbox
-- started from it, which then gets its own). NULL: files only.
ALTER TABLE snapshots ADD COLUMN memory_bytes BIGINT;
ALTER TABLE snapshots ADD COLUMN memory_key TEXT;
