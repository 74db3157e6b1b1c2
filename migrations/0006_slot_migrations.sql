-- Slot moves between engines (the console's migrations): one row per move, run one at a time
-- in id order. `source` and `target` are engine addresses; `slots` the ranges ("0-99 200").
-- state: queued | copying | holding | switched | deleting | done | failed | cancelled.
CREATE TABLE slot_moves (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    source TEXT NOT NULL,
    target TEXT NOT NULL,
    slots TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    keys INTEGER NOT NULL DEFAULT 0,
    bytes INTEGER NOT NULL DEFAULT 0,
    pause_ms INTEGER,                     -- how long the slots were held on the proxies
    estimated_keys INTEGER,
    estimated_bytes INTEGER,
    error TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

-- Console-wide switches: `moves_paused` (1: no new move starts).
CREATE TABLE settings (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
