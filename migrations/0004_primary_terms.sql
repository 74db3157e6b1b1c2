-- Each slot-map engine's primary term: raised at every failover and given to the engine
-- that takes over (TERRACE.EPOCH), so storage refuses the writes of a former primary.
ALTER TABLE engines ADD COLUMN epoch INTEGER NOT NULL DEFAULT 1;
