-- Engine groups (a slot-map primary and its replicas) get ids of their own, never reused: a
-- failover changes a group's primary address, never its id, and a removal renumbers `idx`
-- but not the ids. Slot moves name their source and target groups (issue 46, finding 7: a
-- move bound to addresses failed forever once a failover changed one).
ALTER TABLE engines ADD COLUMN group_id INTEGER;
UPDATE engines SET group_id = idx + 1;
CREATE UNIQUE INDEX engines_group_id ON engines (group_id);
-- Hands out group ids (AUTOINCREMENT: never one used before, even a removed group's).
CREATE TABLE engine_group_ids (id INTEGER PRIMARY KEY AUTOINCREMENT);
INSERT INTO engine_group_ids (id) SELECT group_id FROM engines;

-- `source` and `target` stay: the addresses of the group's primary in the latest attempt
-- (the one an undo aborts). A move stuck on an address a failover replaced finds its group
-- through that address's place among the replicas.
ALTER TABLE slot_moves ADD COLUMN source_group INTEGER;
ALTER TABLE slot_moves ADD COLUMN target_group INTEGER;
-- Every attempt made (`attempts` counts those that failed for a reason of their own, not a
-- failover of either side); the engines' job of an attempt is `move-<id>-<runs>`.
ALTER TABLE slot_moves ADD COLUMN runs INTEGER NOT NULL DEFAULT 0;
UPDATE slot_moves SET runs = attempts;
UPDATE slot_moves SET
    source_group = COALESCE(
        (SELECT group_id FROM engines WHERE address = slot_moves.source),
        (SELECT e.group_id FROM replicas r JOIN engines e ON e.idx = r.engine WHERE r.address = slot_moves.source)),
    target_group = COALESCE(
        (SELECT group_id FROM engines WHERE address = slot_moves.target),
        (SELECT e.group_id FROM replicas r JOIN engines e ON e.idx = r.engine WHERE r.address = slot_moves.target));
