-- Replicas of the slot map's engines (the primaries in `engines`), and the log of what the
-- coordinator did (failovers, re-pointed replicas) that the console shows.
CREATE TABLE replicas (
    address TEXT PRIMARY KEY,
    engine INTEGER NOT NULL REFERENCES engines(idx)
);

CREATE TABLE events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at INTEGER NOT NULL,
    kind TEXT NOT NULL,
    message TEXT NOT NULL
);
