-- The console's own database (SQLite): who may log in, the tenants and the topology it is the
-- source of truth for, and what it sampled from the engines.

CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,          -- argon2id, PHC string
    created_at INTEGER NOT NULL
);

CREATE TABLE sessions (
    token_hash TEXT PRIMARY KEY,          -- SHA-256 of the cookie's token
    user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    csrf TEXT NOT NULL,
    expires_at INTEGER NOT NULL
);

CREATE TABLE api_tokens (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,      -- SHA-256 of the token; the token is shown once
    prefix TEXT NOT NULL,                 -- first characters, to recognise it in the list
    created_at INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at INTEGER
);

CREATE TABLE tenants (
    name TEXT PRIMARY KEY,
    password_sha256 TEXT,                 -- what the proxy checks AUTH against; never shown
    max_qps INTEGER,
    max_memory INTEGER,                   -- bytes over all engines; NULL = no limit
    compression TEXT NOT NULL,
    compression_mode TEXT NOT NULL,
    storage_mode TEXT NOT NULL,
    memcache_port INTEGER UNIQUE,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE TABLE engines (
    idx INTEGER PRIMARY KEY,              -- position in the slot map
    address TEXT NOT NULL UNIQUE
);

CREATE TABLE slot_ranges (
    first_slot INTEGER PRIMARY KEY,
    last_slot INTEGER NOT NULL,
    engine INTEGER NOT NULL REFERENCES engines(idx)
);

CREATE TABLE proxies (
    address TEXT PRIMARY KEY
);

CREATE TABLE usage_samples (
    tenant TEXT NOT NULL,
    at INTEGER NOT NULL,
    keys INTEGER NOT NULL,
    logical_bytes REAL NOT NULL,
    stored_bytes REAL NOT NULL,
    qps REAL NOT NULL,
    PRIMARY KEY (tenant, at)
);

CREATE TABLE retrains (
    id INTEGER PRIMARY KEY,
    tenant TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    finished_at INTEGER,
    engines_total INTEGER NOT NULL,
    engines_done INTEGER NOT NULL,
    status TEXT NOT NULL,                 -- running | done | failed
    result TEXT                           -- JSON: per engine, the generation and ratio or the error
);
CREATE INDEX retrains_by_tenant ON retrains (tenant, id);
