-- A check value of the master key (an HMAC under a key derived from it), so that a
-- server started with another master key than the one that sealed this database's
-- secrets refuses to start instead of failing every key and secret.
ALTER TABLE installation ADD COLUMN key_check TEXT;
