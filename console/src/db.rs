//! The console's SQLite database (sqlx, runtime queries): opening it with the migrations of
//! `migrations/`, and one function per question the rest of the console asks.

use std::path::Path;

use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions, SqliteRow};
use sqlx::Row;

use crate::tenants::Tenant;

pub type Db = SqlitePool;

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("cannot open the console database {path}: {source}")]
    Open { path: String, source: sqlx::Error },
    #[error("cannot migrate the console database: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("console database: {0}")]
    Query(#[from] sqlx::Error),
}

pub async fn open(path: &Path) -> Result<Db, DbError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| DbError::Open { path: path.display().to_string(), source: sqlx::Error::Io(e) })?;
    }
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .foreign_keys(true)
        .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
        .busy_timeout(std::time::Duration::from_secs(5));
    let pool =
        SqlitePoolOptions::new().max_connections(4).connect_with(options).await.map_err(|source| DbError::Open { path: path.display().to_string(), source })?;
    sqlx::migrate!("../migrations").run(&pool).await?;
    Ok(pool)
}

pub fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

// Users and sessions.

pub async fn user_count(db: &Db) -> Result<i64, DbError> {
    Ok(sqlx::query("SELECT COUNT(*) FROM users").fetch_one(db).await?.get(0))
}

pub async fn add_user(db: &Db, name: &str, password_hash: &str) -> Result<(), DbError> {
    sqlx::query("INSERT INTO users (name, password_hash, created_at) VALUES (?, ?, ?)").bind(name).bind(password_hash).bind(now()).execute(db).await?;
    Ok(())
}

/// (id, password hash) of a user by name.
pub async fn user_by_name(db: &Db, name: &str) -> Result<Option<(i64, String)>, DbError> {
    Ok(sqlx::query("SELECT id, password_hash FROM users WHERE name = ?").bind(name).fetch_optional(db).await?.map(|r| (r.get(0), r.get(1))))
}

/// Replaces a user's password hash and ends the user's other sessions.
pub async fn set_password(db: &Db, user_id: i64, password_hash: &str, keep_session: &str) -> Result<(), DbError> {
    let mut tx = db.begin().await?;
    sqlx::query("UPDATE users SET password_hash = ? WHERE id = ?").bind(password_hash).bind(user_id).execute(&mut *tx).await?;
    sqlx::query("DELETE FROM sessions WHERE user_id = ? AND token_hash <> ?").bind(user_id).bind(keep_session).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(())
}

pub async fn add_session(db: &Db, token_hash: &str, user_id: i64, csrf: &str, expires_at: i64) -> Result<(), DbError> {
    sqlx::query("DELETE FROM sessions WHERE expires_at < ?").bind(now()).execute(db).await?;
    sqlx::query("INSERT INTO sessions (token_hash, user_id, csrf, expires_at) VALUES (?, ?, ?, ?)")
        .bind(token_hash)
        .bind(user_id)
        .bind(csrf)
        .bind(expires_at)
        .execute(db)
        .await?;
    Ok(())
}

/// (user name, CSRF token) of a live session.
pub async fn session(db: &Db, token_hash: &str) -> Result<Option<(String, String)>, DbError> {
    Ok(sqlx::query("SELECT u.name, s.csrf FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.token_hash = ? AND s.expires_at > ?")
        .bind(token_hash)
        .bind(now())
        .fetch_optional(db)
        .await?
        .map(|r| (r.get(0), r.get(1))))
}

pub async fn drop_session(db: &Db, token_hash: &str) -> Result<(), DbError> {
    sqlx::query("DELETE FROM sessions WHERE token_hash = ?").bind(token_hash).execute(db).await?;
    Ok(())
}

// API tokens.

#[derive(Debug, serde::Serialize)]
pub struct ApiToken {
    pub id: i64,
    pub name: String,
    pub prefix: String,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

pub async fn add_token(db: &Db, name: &str, token_hash: &str, prefix: &str) -> Result<i64, DbError> {
    let r = sqlx::query("INSERT INTO api_tokens (name, token_hash, prefix, created_at) VALUES (?, ?, ?, ?)")
        .bind(name)
        .bind(token_hash)
        .bind(prefix)
        .bind(now())
        .execute(db)
        .await?;
    Ok(r.last_insert_rowid())
}

pub async fn tokens(db: &Db) -> Result<Vec<ApiToken>, DbError> {
    let rows = sqlx::query("SELECT id, name, prefix, created_at, last_used_at, revoked_at FROM api_tokens ORDER BY id").fetch_all(db).await?;
    Ok(rows
        .iter()
        .map(|r| ApiToken { id: r.get(0), name: r.get(1), prefix: r.get(2), created_at: r.get(3), last_used_at: r.get(4), revoked_at: r.get(5) })
        .collect())
}

/// Whether a token (by hash) is valid; notes its use.
pub async fn token_valid(db: &Db, token_hash: &str) -> Result<bool, DbError> {
    let r = sqlx::query("UPDATE api_tokens SET last_used_at = ? WHERE token_hash = ? AND revoked_at IS NULL").bind(now()).bind(token_hash).execute(db).await?;
    Ok(r.rows_affected() == 1)
}

/// False: no such token, or already revoked.
pub async fn revoke_token(db: &Db, id: i64) -> Result<bool, DbError> {
    let r = sqlx::query("UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL").bind(now()).bind(id).execute(db).await?;
    Ok(r.rows_affected() == 1)
}

// Tenants.

fn tenant_of(r: &SqliteRow) -> Tenant {
    let password_sha256: Option<String> = r.get("password_sha256");
    Tenant {
        name: r.get("name"),
        has_password: password_sha256.is_some(),
        password_sha256,
        max_qps: r.get::<Option<i64>, _>("max_qps").map(|v| v as u64),
        max_memory: r.get::<Option<i64>, _>("max_memory").map(|v| v as u64),
        compression: r.get("compression"),
        compression_mode: r.get("compression_mode"),
        storage_mode: r.get("storage_mode"),
        tier_policy: r.get("tier_policy"),
        wal: r.get("wal"),
        memcache_port: r.get::<Option<i64>, _>("memcache_port").map(|v| v as u16),
        replica_reads: r.get::<i64, _>("replica_reads") != 0,
        created_at: r.get("created_at"),
        updated_at: r.get("updated_at"),
    }
}

pub async fn tenants(db: &Db) -> Result<Vec<Tenant>, DbError> {
    Ok(sqlx::query("SELECT * FROM tenants ORDER BY name").fetch_all(db).await?.iter().map(tenant_of).collect())
}

pub async fn tenant(db: &Db, name: &str) -> Result<Option<Tenant>, DbError> {
    Ok(sqlx::query("SELECT * FROM tenants WHERE name = ?").bind(name).fetch_optional(db).await?.as_ref().map(tenant_of))
}

/// Inserts or replaces. Err(Conflict) names what is already taken.
pub async fn save_tenant(db: &Db, t: &Tenant, create: bool) -> Result<Result<(), String>, DbError> {
    if create && tenant(db, &t.name).await?.is_some() {
        return Ok(Err(format!("tenant '{}' already exists", t.name)));
    }
    if let Some(p) = t.memcache_port {
        let other: Option<String> = sqlx::query("SELECT name FROM tenants WHERE memcache_port = ? AND name <> ?")
            .bind(p as i64)
            .bind(&t.name)
            .fetch_optional(db)
            .await?
            .map(|r| r.get(0));
        if let Some(o) = other {
            return Ok(Err(format!("memcache_port {p} is already tenant '{o}''s")));
        }
    }
    sqlx::query(
        "INSERT OR REPLACE INTO tenants (name, password_sha256, max_qps, max_memory, compression, compression_mode, storage_mode, tier_policy, wal, memcache_port, replica_reads, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(&t.name)
    .bind(&t.password_sha256)
    .bind(t.max_qps.map(|v| v as i64))
    .bind(t.max_memory.map(|v| v as i64))
    .bind(&t.compression)
    .bind(&t.compression_mode)
    .bind(&t.storage_mode)
    .bind(&t.tier_policy)
    .bind(&t.wal)
    .bind(t.memcache_port.map(|v| v as i64))
    .bind(t.replica_reads as i64)
    .bind(t.created_at)
    .bind(t.updated_at)
    .execute(db)
    .await?;
    Ok(Ok(()))
}

pub async fn delete_tenant(db: &Db, name: &str) -> Result<bool, DbError> {
    let r = sqlx::query("DELETE FROM tenants WHERE name = ?").bind(name).execute(db).await?;
    sqlx::query("DELETE FROM usage_samples WHERE tenant = ?").bind(name).execute(db).await?;
    Ok(r.rows_affected() == 1)
}

// Topology.

/// Engines in slot-map order, and the slot ranges as (first, last, engine).
pub async fn topology(db: &Db) -> Result<(Vec<String>, Vec<(u16, u16, usize)>), DbError> {
    let engines = sqlx::query("SELECT address FROM engines ORDER BY idx").fetch_all(db).await?.iter().map(|r| r.get(0)).collect();
    let ranges = sqlx::query("SELECT first_slot, last_slot, engine FROM slot_ranges ORDER BY first_slot")
        .fetch_all(db)
        .await?
        .iter()
        .map(|r| (r.get::<i64, _>(0) as u16, r.get::<i64, _>(1) as u16, r.get::<i64, _>(2) as usize))
        .collect();
    Ok((engines, ranges))
}

/// The first start: engines from the configuration, slots split evenly, their replicas (the
/// i-th follows engine i modulo the engines), the proxies.
pub async fn seed_topology(db: &Db, engines: &[String], replicas: &[String], proxies: &[String]) -> Result<(), DbError> {
    let mut tx = db.begin().await?;

    let have: i64 = sqlx::query("SELECT COUNT(*) FROM engines").fetch_one(&mut *tx).await?.get(0);
    if have == 0 {
        let n = engines.len();
        for (i, a) in engines.iter().enumerate() {
            sqlx::query("INSERT INTO engines (idx, address) VALUES (?, ?)").bind(i as i64).bind(a).execute(&mut *tx).await?;
            let first = i * 16384 / n;
            let last = (i + 1) * 16384 / n - 1;
            sqlx::query("INSERT INTO slot_ranges (first_slot, last_slot, engine) VALUES (?, ?, ?)")
                .bind(first as i64)
                .bind(last as i64)
                .bind(i as i64)
                .execute(&mut *tx)
                .await?;
        }
        for (i, r) in replicas.iter().enumerate() {
            sqlx::query("INSERT INTO replicas (address, engine) VALUES (?, ?)").bind(r).bind((i % n) as i64).execute(&mut *tx).await?;
        }
    }
    let have: i64 = sqlx::query("SELECT COUNT(*) FROM proxies").fetch_one(&mut *tx).await?.get(0);
    if have == 0 {
        for p in proxies {
            sqlx::query("INSERT INTO proxies (address) VALUES (?)").bind(p).execute(&mut *tx).await?;
        }
    }
    tx.commit().await?;
    Ok(())
}

/// Every replica with the index of the engine it follows.
pub async fn replicas(db: &Db) -> Result<Vec<(String, usize)>, DbError> {
    let rows = sqlx::query("SELECT address, engine FROM replicas ORDER BY engine, address").fetch_all(db).await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get::<i64, _>(1) as usize)).collect())
}

/// A failover in the slot map: engine `idx` is now `new_primary` (one of its replicas), and
/// `old_primary` becomes one of its replicas (re-pointed when it answers again).
pub async fn replace_primary(db: &Db, idx: usize, old_primary: &str, new_primary: &str) -> Result<(), DbError> {
    let mut tx = db.begin().await?;
    sqlx::query("DELETE FROM replicas WHERE address = ?").bind(new_primary).execute(&mut *tx).await?;
    sqlx::query("UPDATE engines SET address = ? WHERE idx = ?").bind(new_primary).bind(idx as i64).execute(&mut *tx).await?;
    sqlx::query("INSERT OR REPLACE INTO replicas (address, engine) VALUES (?, ?)").bind(old_primary).bind(idx as i64).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(())
}

/// Each slot-map engine's primary term (its epoch), by index.
pub async fn epochs(db: &Db) -> Result<Vec<u64>, DbError> {
    let rows = sqlx::query("SELECT epoch FROM engines ORDER BY idx").fetch_all(db).await?;
    Ok(rows.iter().map(|r| r.get::<i64, _>(0) as u64).collect())
}

/// Raises engine `idx`'s epoch for a new primary term and returns it (taken before the new
/// primary is told, so no two engines are ever given one epoch, even across a crash).
pub async fn next_epoch(db: &Db, idx: usize) -> Result<u64, DbError> {
    let row = sqlx::query("UPDATE engines SET epoch = epoch + 1 WHERE idx = ? RETURNING epoch").bind(idx as i64).fetch_one(db).await?;
    Ok(row.get::<i64, _>(0) as u64)
}

/// One thing the coordinator did, for the console's log.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Event {
    pub at: i64,
    pub kind: String,
    pub message: String,
}

pub async fn add_event(db: &Db, kind: &str, message: &str) -> Result<(), DbError> {
    sqlx::query("INSERT INTO events (at, kind, message) VALUES (?, ?, ?)").bind(now()).bind(kind).bind(message).execute(db).await?;
    Ok(())
}

/// The newest `limit` events, newest first.
pub async fn events(db: &Db, limit: i64) -> Result<Vec<Event>, DbError> {
    let rows = sqlx::query("SELECT at, kind, message FROM events ORDER BY id DESC LIMIT ?").bind(limit).fetch_all(db).await?;
    Ok(rows.iter().map(|r| Event { at: r.get(0), kind: r.get(1), message: r.get(2) }).collect())
}

pub async fn proxies(db: &Db) -> Result<Vec<String>, DbError> {
    Ok(sqlx::query("SELECT address FROM proxies ORDER BY address").fetch_all(db).await?.iter().map(|r| r.get(0)).collect())
}

// Usage samples.

#[derive(Debug, Clone, serde::Serialize)]
pub struct Usage {
    pub at: i64,
    pub keys: i64,
    pub logical_bytes: f64,
    pub stored_bytes: f64,
    pub qps: f64,
}

pub async fn add_usage(db: &Db, tenant: &str, u: &Usage) -> Result<(), DbError> {
    sqlx::query("INSERT OR REPLACE INTO usage_samples (tenant, at, keys, logical_bytes, stored_bytes, qps) VALUES (?, ?, ?, ?, ?, ?)")
        .bind(tenant)
        .bind(u.at)
        .bind(u.keys)
        .bind(u.logical_bytes)
        .bind(u.stored_bytes)
        .bind(u.qps)
        .execute(db)
        .await?;
    // A week at one sample per 10 s is 60480 rows per tenant; keep that.
    sqlx::query("DELETE FROM usage_samples WHERE tenant = ? AND at < ?").bind(tenant).bind(u.at - 7 * 86400).execute(db).await?;
    Ok(())
}

pub async fn usage(db: &Db, tenant: &str, since: i64) -> Result<Vec<Usage>, DbError> {
    let rows = sqlx::query("SELECT at, keys, logical_bytes, stored_bytes, qps FROM usage_samples WHERE tenant = ? AND at >= ? ORDER BY at")
        .bind(tenant)
        .bind(since)
        .fetch_all(db)
        .await?;
    Ok(rows.iter().map(|r| Usage { at: r.get(0), keys: r.get(1), logical_bytes: r.get(2), stored_bytes: r.get(3), qps: r.get(4) }).collect())
}

// Retraining runs.

#[derive(Debug, Clone, serde::Serialize)]
pub struct Retrain {
    pub id: i64,
    pub tenant: String,
    pub started_at: i64,
    pub finished_at: Option<i64>,
    pub engines_total: i64,
    pub engines_done: i64,
    pub status: String,
    pub result: Option<serde_json::Value>,
}

pub async fn start_retrain(db: &Db, tenant: &str, engines: usize) -> Result<i64, DbError> {
    let r = sqlx::query("INSERT INTO retrains (tenant, started_at, engines_total, engines_done, status) VALUES (?, ?, ?, 0, 'running')")
        .bind(tenant)
        .bind(now())
        .bind(engines as i64)
        .execute(db)
        .await?;
    Ok(r.last_insert_rowid())
}

pub async fn retrain_progress(db: &Db, id: i64, done: usize, result: &serde_json::Value, status: &str) -> Result<(), DbError> {
    let finished = (status != "running").then(now);
    sqlx::query("UPDATE retrains SET engines_done = ?, result = ?, status = ?, finished_at = ? WHERE id = ?")
        .bind(done as i64)
        .bind(result.to_string())
        .bind(status)
        .bind(finished)
        .bind(id)
        .execute(db)
        .await?;
    Ok(())
}

pub async fn last_retrain(db: &Db, tenant: &str) -> Result<Option<Retrain>, DbError> {
    let row = sqlx::query(
        "SELECT id, tenant, started_at, finished_at, engines_total, engines_done, status, result FROM retrains WHERE tenant = ? ORDER BY id DESC LIMIT 1",
    )
    .bind(tenant)
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| Retrain {
        id: r.get(0),
        tenant: r.get(1),
        started_at: r.get(2),
        finished_at: r.get(3),
        engines_total: r.get(4),
        engines_done: r.get(5),
        status: r.get(6),
        result: r.get::<Option<String>, _>(7).and_then(|s| serde_json::from_str(&s).ok()),
    }))
}

/// Runs left "running" by a console that stopped: they will not finish.
pub async fn abandon_retrains(db: &Db) -> Result<(), DbError> {
    sqlx::query(
        "UPDATE retrains SET status = 'failed', finished_at = ?, result = '{\"error\":\"the console restarted during the run\"}' WHERE status = 'running'",
    )
    .bind(now())
    .execute(db)
    .await?;
    Ok(())
}
