-- The console's history of every node and tenant (console/src/history.rs): a row per sample
-- (every `sample_ms`, 10 s by default) kept a day, then averaged into 5-minute rows kept 30
-- days. `resolution`: the seconds a row covers. Rates are per second over the interval.
CREATE TABLE node_samples (
    address TEXT NOT NULL,
    at INTEGER NOT NULL,
    resolution INTEGER NOT NULL,
    kind TEXT NOT NULL,
    ops_per_sec REAL,
    hit_ratio REAL,
    used_memory REAL,
    maxmemory REAL,
    evicted_per_sec REAL,
    oom_per_sec REAL,
    repl_lag REAL,
    p50_us REAL,
    p99_us REAL,
    clients REAL,
    PRIMARY KEY (address, at)
);

CREATE TABLE tenant_samples (
    tenant TEXT NOT NULL,
    at INTEGER NOT NULL,
    resolution INTEGER NOT NULL,
    ops_per_sec REAL,
    hit_ratio REAL,
    used_bytes REAL,
    quota_bytes REAL,
    oom_per_sec REAL,
    p50_us REAL,
    p99_us REAL,
    PRIMARY KEY (tenant, at)
);

-- Its operations per second by command class (string, hash, list, …).
CREATE TABLE tenant_class_samples (
    tenant TEXT NOT NULL,
    at INTEGER NOT NULL,
    resolution INTEGER NOT NULL,
    class TEXT NOT NULL,
    ops_per_sec REAL NOT NULL,
    PRIMARY KEY (tenant, at, class)
);
