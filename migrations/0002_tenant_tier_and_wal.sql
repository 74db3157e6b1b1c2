-- A tenant's use of the engines' PMem tier (engine | dram-only | dram-first | pmem-first |
-- bidirectional) and whether its commands are logged (engine | off).
ALTER TABLE tenants ADD COLUMN tier_policy TEXT NOT NULL DEFAULT 'engine';
ALTER TABLE tenants ADD COLUMN wal TEXT NOT NULL DEFAULT 'engine';
