-- Each sandbox's activity timeline: one entry per thing done in it (commands, files,
-- terminals, network, its life), the entry's JSON in body. A command's entry is written
-- when it starts and again when it ends: each write gives it a new position, the order
-- readers follow. Trimmed to a number of entries and bytes per sandbox, oldest first.
-- Entries outlive the sandbox's row: activity_sandboxes says when each sandbox ended
-- (ended_at, set by the retention pass) and how many entries were trimmed or never
-- written, and its entries go once ended_at is older than the retention.
CREATE TABLE activity (
    entry_id TEXT PRIMARY KEY,
    sandbox_id TEXT NOT NULL,
    position TEXT NOT NULL,
    at INTEGER NOT NULL,
    kind TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX activity_by_position ON activity (sandbox_id, position);
CREATE INDEX activity_by_kind ON activity (sandbox_id, kind, position);
CREATE TABLE activity_sandboxes (
    sandbox_id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL,
    dropped INTEGER NOT NULL,
    ended_at INTEGER
);
-- Terminal sessions recorded as asciicast v2, in chunks written in order (seq); they go
-- with their sandbox's timeline.
CREATE TABLE recordings (
    sandbox_id TEXT NOT NULL,
    terminal_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (sandbox_id, terminal_id, seq)
);
