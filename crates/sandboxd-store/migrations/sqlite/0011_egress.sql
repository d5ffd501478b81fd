-- What an `allowlist` sandbox may reach: a JSON array of entries as the policy writes
-- them (lower case, no duplicates); `[]` in the other modes.
ALTER TABLE sandboxes ADD COLUMN egress TEXT NOT NULL DEFAULT '[]';
