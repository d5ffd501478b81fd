-- A sandbox's labels, as given at creation: a JSON object of strings.
ALTER TABLE sandboxes ADD COLUMN labels TEXT NOT NULL DEFAULT '{}';
