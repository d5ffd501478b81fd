-- A sandbox paused with its memory on disk (hibernated): the size of its checkpoint, in
-- bytes, while it is; NULL when it runs or is paused in memory.
ALTER TABLE sandboxes ADD COLUMN hibernated_bytes BIGINT;
-- `auto_pause` says where an idle sandbox's memory goes: 0 it is killed, 1 paused in
-- memory, 2 paused to disk.
