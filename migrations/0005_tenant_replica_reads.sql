-- Whether a tenant's reads go to replicas of the engine owning the key (0: to the primary).
ALTER TABLE tenants ADD COLUMN replica_reads INTEGER NOT NULL DEFAULT 0;
