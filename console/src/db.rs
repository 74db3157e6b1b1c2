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
    // Sessions, token and password hashes and the audit log are the operators' alone: the
    // file (SQLite gives its -wal and -shm files the same mode) is made, or put back to, 0600.
    let open_err = |e: std::io::Error| DbError::Open { path: path.display().to_string(), source: sqlx::Error::Io(e) };
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(path).map_err(open_err)?;
        let beside = |suffix: &str| std::path::PathBuf::from(format!("{}{suffix}", path.display()));
        for file in [path.to_path_buf(), beside("-wal"), beside("-shm")] {
            if file.exists() {
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).map_err(open_err)?;
            }
        }
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

/// A write transaction, holding the database's write lock from its start (BEGIN IMMEDIATE):
/// several writers (the reconcile loop, the history, the slot-move driver, requests) wait
/// for each other (`busy_timeout`). A deferred transaction that read first could not take
/// the lock once another had written since — SQLite answers "database is locked" at once,
/// and a slot move was undone for it (slot_migration failed on it).
async fn write(db: &Db) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, sqlx::Error> {
    db.begin_with("BEGIN IMMEDIATE").await
}

pub fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

// Users and sessions.

pub async fn user_count(db: &Db) -> Result<i64, DbError> {
    Ok(sqlx::query("SELECT COUNT(*) FROM users").fetch_one(db).await?.get(0))
}

/// False: a user of that name exists. `tenant`: the one tenant the user sees (None: all).
pub async fn add_user(db: &Db, name: &str, password_hash: &str, role: &str, tenant: Option<&str>) -> Result<bool, DbError> {
    let r = sqlx::query("INSERT OR IGNORE INTO users (name, password_hash, created_at, role, tenant) VALUES (?, ?, ?, ?, ?)")
        .bind(name)
        .bind(password_hash)
        .bind(now())
        .bind(role)
        .bind(tenant)
        .execute(db)
        .await?;
    Ok(r.rows_affected() == 1)
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct User {
    pub name: String,
    pub role: String,
    pub created_at: i64,
    /// The one tenant the user sees and manages (None: the whole appliance).
    pub tenant: Option<String>,
}

fn user_of(r: &sqlx::sqlite::SqliteRow) -> User {
    User { name: r.get(0), role: r.get(1), created_at: r.get(2), tenant: r.get(3) }
}

pub async fn users(db: &Db) -> Result<Vec<User>, DbError> {
    let rows = sqlx::query("SELECT name, role, created_at, tenant FROM users ORDER BY name").fetch_all(db).await?;
    Ok(rows.iter().map(user_of).collect())
}

pub async fn user(db: &Db, name: &str) -> Result<Option<User>, DbError> {
    Ok(sqlx::query("SELECT name, role, created_at, tenant FROM users WHERE name = ?").bind(name).fetch_optional(db).await?.as_ref().map(user_of))
}

/// Changes a user's role (its sessions end: they carried the old one). False: no such user.
pub async fn set_role(db: &Db, name: &str, role: &str) -> Result<bool, DbError> {
    let mut tx = write(db).await?;
    let r = sqlx::query("UPDATE users SET role = ? WHERE name = ?").bind(role).bind(name).execute(&mut *tx).await?;
    sqlx::query("DELETE FROM sessions WHERE user_id = (SELECT id FROM users WHERE name = ?)").bind(name).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(r.rows_affected() == 1)
}

/// Deletes a user (its sessions go with it). False: no such user.
pub async fn delete_user(db: &Db, name: &str) -> Result<bool, DbError> {
    Ok(sqlx::query("DELETE FROM users WHERE name = ?").bind(name).execute(db).await?.rows_affected() == 1)
}

pub async fn admin_count(db: &Db) -> Result<i64, DbError> {
    Ok(sqlx::query("SELECT COUNT(*) FROM users WHERE role = 'admin'").fetch_one(db).await?.get(0))
}

/// (id, password hash) of a user by name.
pub async fn user_by_name(db: &Db, name: &str) -> Result<Option<(i64, String)>, DbError> {
    Ok(sqlx::query("SELECT id, password_hash FROM users WHERE name = ?").bind(name).fetch_optional(db).await?.map(|r| (r.get(0), r.get(1))))
}

/// Replaces a user's password hash and ends the user's other sessions.
pub async fn set_password(db: &Db, user_id: i64, password_hash: &str, keep_session: &str) -> Result<(), DbError> {
    let mut tx = write(db).await?;
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

/// (user name, CSRF token, role, tenant) of a live session.
pub async fn session(db: &Db, token_hash: &str) -> Result<Option<(String, String, String, Option<String>)>, DbError> {
    Ok(sqlx::query("SELECT u.name, s.csrf, u.role, u.tenant FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.token_hash = ? AND s.expires_at > ?")
        .bind(token_hash)
        .bind(now())
        .fetch_optional(db)
        .await?
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3))))
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
    pub role: String,
    pub expires_at: Option<i64>,
    pub created_by: Option<String>,
    /// The one tenant the token sees and manages (None: the whole appliance).
    pub tenant: Option<String>,
}

/// What a new API token is: its name, role, end (None: until revoked), maker and tenant.
pub struct NewToken<'a> {
    pub name: &'a str,
    pub role: &'a str,
    pub expires_at: Option<i64>,
    pub created_by: &'a str,
    pub tenant: Option<&'a str>,
}

pub async fn add_token(db: &Db, token_hash: &str, prefix: &str, t: &NewToken<'_>) -> Result<i64, DbError> {
    let r = sqlx::query("INSERT INTO api_tokens (name, token_hash, prefix, created_at, role, expires_at, created_by, tenant) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
        .bind(t.name)
        .bind(token_hash)
        .bind(prefix)
        .bind(now())
        .bind(t.role)
        .bind(t.expires_at)
        .bind(t.created_by)
        .bind(t.tenant)
        .execute(db)
        .await?;
    Ok(r.last_insert_rowid())
}

pub async fn tokens(db: &Db) -> Result<Vec<ApiToken>, DbError> {
    let rows = sqlx::query("SELECT id, name, prefix, created_at, last_used_at, revoked_at, role, expires_at, created_by, tenant FROM api_tokens ORDER BY id")
        .fetch_all(db)
        .await?;
    Ok(rows
        .iter()
        .map(|r| ApiToken {
            id: r.get(0),
            name: r.get(1),
            prefix: r.get(2),
            created_at: r.get(3),
            last_used_at: r.get(4),
            revoked_at: r.get(5),
            role: r.get(6),
            expires_at: r.get(7),
            created_by: r.get(8),
            tenant: r.get(9),
        })
        .collect())
}

/// A valid token's (name, role, tenant), by its hash (not revoked, not expired); notes its use.
pub async fn token_valid(db: &Db, token_hash: &str) -> Result<Option<(String, String, Option<String>)>, DbError> {
    let r = sqlx::query(
        "UPDATE api_tokens SET last_used_at = ? WHERE token_hash = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?) RETURNING name, role, tenant",
    )
    .bind(now())
    .bind(token_hash)
    .bind(now())
    .fetch_optional(db)
    .await?;
    Ok(r.map(|r| (r.get(0), r.get(1), r.get(2))))
}

/// False: no such token, or already revoked.
pub async fn revoke_token(db: &Db, id: i64) -> Result<bool, DbError> {
    let r = sqlx::query("UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL").bind(now()).bind(id).execute(db).await?;
    Ok(r.rows_affected() == 1)
}

// Tenants.

fn tenant_of(r: &SqliteRow) -> Tenant {
    let password_hash: Option<String> = r.get("password_hash");
    Tenant {
        name: r.get("name"),
        has_password: password_hash.is_some(),
        password_hash,
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
        "INSERT OR REPLACE INTO tenants (name, password_hash, max_qps, max_memory, compression, compression_mode, storage_mode, tier_policy, wal, memcache_port, replica_reads, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(&t.name)
    .bind(&t.password_hash)
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
    let mut tx = write(db).await?;
    let r = sqlx::query("DELETE FROM tenants WHERE name = ?").bind(name).execute(&mut *tx).await?;
    sqlx::query("DELETE FROM usage_samples WHERE tenant = ?").bind(name).execute(&mut *tx).await?;
    sqlx::query("DELETE FROM advisor_state WHERE tenant = ?").bind(name).execute(&mut *tx).await?;
    for table in ["tenant_samples", "tenant_class_samples"] {
        sqlx::query(&format!("DELETE FROM {table} WHERE tenant = ?")).bind(name).execute(&mut *tx).await?;
    }
    if r.rows_affected() == 1 {
        sqlx::query("INSERT OR REPLACE INTO dropped_tenants (name, deleted_at) VALUES (?, ?)").bind(name).bind(now()).execute(&mut *tx).await?;
        // Its own people go with it (a tenant made later under the name is not theirs).
        sqlx::query("DELETE FROM sessions WHERE user_id IN (SELECT id FROM users WHERE tenant = ?)").bind(name).execute(&mut *tx).await?;
        sqlx::query("DELETE FROM users WHERE tenant = ?").bind(name).execute(&mut *tx).await?;
        sqlx::query("UPDATE api_tokens SET revoked_at = ? WHERE tenant = ? AND revoked_at IS NULL").bind(now()).bind(name).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(r.rows_affected() == 1)
}

/// The advisor's last recommendation for `tenant`, if any.
pub async fn last_recommendation(db: &Db, tenant: &str) -> Result<Option<String>, DbError> {
    Ok(sqlx::query("SELECT recommended FROM advisor_state WHERE tenant = ?").bind(tenant).fetch_optional(db).await?.map(|r| r.get(0)))
}

/// Records the advisor's recommendation for `tenant` (its time only when it changed).
pub async fn record_recommendation(db: &Db, tenant: &str, recommended: &str) -> Result<(), DbError> {
    sqlx::query(
        "INSERT INTO advisor_state (tenant, recommended, since) VALUES (?, ?, ?)
         ON CONFLICT(tenant) DO UPDATE SET recommended = excluded.recommended, since = excluded.since WHERE recommended <> excluded.recommended",
    )
    .bind(tenant)
    .bind(recommended)
    .bind(now())
    .execute(db)
    .await?;
    Ok(())
}

/// Deleted tenants whose namespaces engines must not keep.
pub async fn dropped_tenants(db: &Db) -> Result<Vec<String>, DbError> {
    Ok(sqlx::query("SELECT name FROM dropped_tenants WHERE name NOT IN (SELECT name FROM tenants) ORDER BY name")
        .fetch_all(db)
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect())
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
/// i-th follows engine i modulo the engines), the proxies. `own_proxies`: the proxies are
/// exactly `proxies` at every start (`terrace up`: its own proxy, whose port may change).
pub async fn seed_topology(db: &Db, engines: &[String], replicas: &[String], proxies: &[String], own_proxies: bool) -> Result<(), DbError> {
    let mut tx = write(db).await?;

    let have: i64 = sqlx::query("SELECT COUNT(*) FROM engines").fetch_one(&mut *tx).await?.get(0);
    if have == 0 {
        let n = engines.len();
        for (i, a) in engines.iter().enumerate() {
            let group = new_group_id(&mut tx).await?;
            sqlx::query("INSERT INTO engines (idx, address, group_id) VALUES (?, ?, ?)").bind(i as i64).bind(a).bind(group).execute(&mut *tx).await?;
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
    if own_proxies {
        sqlx::query("DELETE FROM proxies").execute(&mut *tx).await?;
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

/// A group id never handed out before (`engine_group_ids`).
async fn new_group_id(tx: &mut sqlx::Transaction<'static, sqlx::Sqlite>) -> Result<i64, sqlx::Error> {
    Ok(sqlx::query("INSERT INTO engine_group_ids DEFAULT VALUES RETURNING id").fetch_one(&mut **tx).await?.get(0))
}

/// A group's primary's address now (None: no such group any more).
pub async fn group_primary(db: &Db, group_id: i64) -> Result<Option<String>, DbError> {
    let row = sqlx::query("SELECT address FROM engines WHERE group_id = ?").bind(group_id).fetch_optional(db).await?;
    Ok(row.map(|r| r.get(0)))
}

/// Every replica with the index of the engine it follows.
pub async fn replicas(db: &Db) -> Result<Vec<(String, usize)>, DbError> {
    let rows = sqlx::query("SELECT address, engine FROM replicas ORDER BY engine, address").fetch_all(db).await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get::<i64, _>(1) as usize)).collect())
}

/// A slot-map group's primary term: the group it is a term of (the storage fence's name for
/// it) and its epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    pub group: String,
    pub epoch: u64,
}

impl Term {
    fn of(group_id: i64, epoch: i64) -> Term {
        // (`range-N`: terms were named by slot-map index before groups had ids, and the
        // first ids continue those names (id = index + 1). Named by id, a group keeps its
        // name — and its fence in storage — when a removal renumbers the indexes.)
        Term { group: format!("range-{}", group_id - 1), epoch: epoch as u64 }
    }
}

/// Each slot-map engine's primary term, by index.
pub async fn terms(db: &Db) -> Result<Vec<Term>, DbError> {
    let rows = sqlx::query("SELECT group_id, epoch FROM engines ORDER BY idx").fetch_all(db).await?;
    Ok(rows.iter().map(|r| Term::of(r.get(0), r.get(1))).collect())
}

/// Raises engine `idx`'s epoch for a new primary term and returns it (taken before the new
/// primary is told, so no two engines are ever given one epoch, even across a crash).
pub async fn next_term(db: &Db, idx: usize) -> Result<Term, DbError> {
    let row = sqlx::query("UPDATE engines SET epoch = epoch + 1 WHERE idx = ? RETURNING group_id, epoch").bind(idx as i64).fetch_one(db).await?;
    Ok(Term::of(row.get(0), row.get(1)))
}

/// A failover's decision, in one transaction: group `idx`'s next term, and `new_primary` in
/// the map in place of `old_primary` (which becomes its replica). Answers the new term.
pub async fn decide_failover(db: &Db, idx: usize, old_primary: &str, new_primary: &str) -> Result<Term, DbError> {
    let mut tx = write(db).await?;
    let row = sqlx::query("UPDATE engines SET epoch = epoch + 1, address = ? WHERE idx = ? RETURNING group_id, epoch")
        .bind(new_primary)
        .bind(idx as i64)
        .fetch_one(&mut *tx)
        .await?;
    sqlx::query("DELETE FROM replicas WHERE address = ?").bind(new_primary).execute(&mut *tx).await?;
    sqlx::query("INSERT OR REPLACE INTO replicas (address, engine) VALUES (?, ?)").bind(old_primary).bind(idx as i64).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(Term::of(row.get(0), row.get(1)))
}

/// One thing the coordinator did, for the console's log.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Event {
    pub at: i64,
    pub kind: String,
    pub message: String,
    /// Who: "user alice", "token ci"; None: the console itself.
    pub actor: Option<String>,
    pub target: Option<String>,
    /// JSON of what changed, before and after.
    pub before: Option<String>,
    pub after: Option<String>,
}

impl Event {
    /// The state before and after, as the JSON they were stored as (Null: none).
    pub fn states(&self) -> (serde_json::Value, serde_json::Value) {
        let parse = |s: &Option<String>| s.as_deref().and_then(|t| serde_json::from_str(t).ok()).unwrap_or(serde_json::Value::Null);
        (parse(&self.before), parse(&self.after))
    }

    /// The event as the API and the webhook send it.
    pub fn to_json(&self) -> serde_json::Value {
        let (before, after) = self.states();
        serde_json::json!({ "at": self.at, "kind": self.kind, "message": self.message, "actor": self.actor, "target": self.target, "before": before, "after": after })
    }
}

pub async fn add_event(db: &Db, kind: &str, message: &str) -> Result<(), DbError> {
    sqlx::query("INSERT INTO events (at, kind, message) VALUES (?, ?, ?)").bind(now()).bind(kind).bind(message).execute(db).await?;
    Ok(())
}

/// An audit entry: `actor` changed `target` (`message` says how), from `before` to `after`.
pub async fn add_change(db: &Db, actor: &str, target: Option<&str>, message: &str, before: Option<&str>, after: Option<&str>) -> Result<(), DbError> {
    sqlx::query("INSERT INTO events (at, kind, message, actor, target, before_state, after_state) VALUES (?, 'change', ?, ?, ?, ?, ?)")
        .bind(now())
        .bind(message)
        .bind(actor)
        .bind(target)
        .bind(before)
        .bind(after)
        .execute(db)
        .await?;
    Ok(())
}

/// A refused attempt: `actor` (with its address) tried what `message` says.
pub async fn add_denied(db: &Db, actor: &str, message: &str) -> Result<(), DbError> {
    sqlx::query("INSERT INTO events (at, kind, message, actor) VALUES (?, 'denied', ?, ?)").bind(now()).bind(message).bind(actor).execute(db).await?;
    Ok(())
}

/// The id of the newest event (0: none).
pub async fn last_event_id(db: &Db) -> Result<i64, DbError> {
    Ok(sqlx::query("SELECT COALESCE(MAX(id), 0) FROM events").fetch_one(db).await?.get(0))
}

/// Up to `limit` events after id `after`, oldest first, with their ids.
pub async fn events_after(db: &Db, after: i64, limit: i64) -> Result<Vec<(i64, Event)>, DbError> {
    let rows = sqlx::query("SELECT id, at, kind, message, actor, target, before_state, after_state FROM events WHERE id > ? ORDER BY id LIMIT ?")
        .bind(after)
        .bind(limit)
        .fetch_all(db)
        .await?;
    Ok(rows
        .iter()
        .map(|r| (r.get(0), Event { at: r.get(1), kind: r.get(2), message: r.get(3), actor: r.get(4), target: r.get(5), before: r.get(6), after: r.get(7) }))
        .collect())
}

/// The newest `limit` events, newest first.
pub async fn events(db: &Db, limit: i64) -> Result<Vec<Event>, DbError> {
    let rows = sqlx::query("SELECT at, kind, message, actor, target, before_state, after_state FROM events ORDER BY id DESC LIMIT ?")
        .bind(limit)
        .fetch_all(db)
        .await?;
    Ok(rows
        .iter()
        .map(|r| Event { at: r.get(0), kind: r.get(1), message: r.get(2), actor: r.get(3), target: r.get(4), before: r.get(5), after: r.get(6) })
        .collect())
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

/// Every tenant's usage and history sample of one instant, in one transaction (a thousand
/// tenants' samples committed one by one took seconds); usage older than a week goes.
pub async fn add_tenant_samples(db: &Db, samples: &[(String, Usage, TenantSample)]) -> Result<(), DbError> {
    let mut tx = write(db).await?;
    for (tenant, u, s) in samples {
        sqlx::query("INSERT OR REPLACE INTO usage_samples (tenant, at, keys, logical_bytes, stored_bytes, qps) VALUES (?, ?, ?, ?, ?, ?)")
            .bind(tenant)
            .bind(u.at)
            .bind(u.keys)
            .bind(u.logical_bytes)
            .bind(u.stored_bytes)
            .bind(u.qps)
            .execute(&mut *tx)
            .await?;
        insert_tenant_sample(&mut tx, tenant, s).await?;
    }
    // A week at one sample per 10 s is 60480 rows per tenant; keep that.
    if let Some((_, u, _)) = samples.first() {
        sqlx::query("DELETE FROM usage_samples WHERE at < ?").bind(u.at - 7 * 86400).execute(&mut *tx).await?;
    }
    tx.commit().await?;
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

// History (console/src/history.rs).

/// One node's sample: rates per second over the interval before `at`; None where unknown
/// (the first sample after a start has no rates; a proxy has no hit ratio).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct NodeSample {
    pub at: i64,
    pub resolution: i64,
    pub kind: String,
    pub ops_per_sec: Option<f64>,
    pub hit_ratio: Option<f64>,
    pub used_memory: Option<f64>,
    pub maxmemory: Option<f64>,
    pub evicted_per_sec: Option<f64>,
    pub oom_per_sec: Option<f64>,
    pub repl_lag: Option<f64>,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub clients: Option<f64>,
}

/// One tenant's sample, over every engine and proxy.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct TenantSample {
    pub at: i64,
    pub resolution: i64,
    pub ops_per_sec: Option<f64>,
    pub hit_ratio: Option<f64>,
    pub used_bytes: Option<f64>,
    pub quota_bytes: Option<f64>,
    pub oom_per_sec: Option<f64>,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    /// Operations per second by command class.
    pub by_class: std::collections::BTreeMap<String, f64>,
}

/// How long raw samples stay, and the span and lifetime of the averaged ones.
pub const RAW_FOR: i64 = 86_400;
pub const AVERAGED_SPAN: i64 = 300;
pub const AVERAGED_FOR: i64 = 30 * 86_400;

const NODE_COLUMNS: &str = "ops_per_sec, hit_ratio, used_memory, maxmemory, evicted_per_sec, oom_per_sec, repl_lag, p50_us, p99_us, clients";
const TENANT_COLUMNS: &str = "ops_per_sec, hit_ratio, used_bytes, quota_bytes, oom_per_sec, p50_us, p99_us";

pub async fn add_node_sample(db: &Db, address: &str, s: &NodeSample) -> Result<(), DbError> {
    sqlx::query(&format!(
        "INSERT OR REPLACE INTO node_samples (address, at, resolution, kind, {NODE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    ))
    .bind(address)
    .bind(s.at)
    .bind(s.resolution)
    .bind(&s.kind)
    .bind(s.ops_per_sec)
    .bind(s.hit_ratio)
    .bind(s.used_memory)
    .bind(s.maxmemory)
    .bind(s.evicted_per_sec)
    .bind(s.oom_per_sec)
    .bind(s.repl_lag)
    .bind(s.p50_us)
    .bind(s.p99_us)
    .bind(s.clients)
    .execute(db)
    .await?;
    Ok(())
}

/// A tenant's history sample (tests: `add_tenant_samples` writes them with their usage).
#[cfg(test)]
pub async fn add_tenant_sample(db: &Db, tenant: &str, s: &TenantSample) -> Result<(), DbError> {
    let mut tx = write(db).await?;
    insert_tenant_sample(&mut tx, tenant, s).await?;
    tx.commit().await?;
    Ok(())
}

async fn insert_tenant_sample(tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>, tenant: &str, s: &TenantSample) -> Result<(), DbError> {
    sqlx::query(&format!("INSERT OR REPLACE INTO tenant_samples (tenant, at, resolution, {TENANT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"))
        .bind(tenant)
        .bind(s.at)
        .bind(s.resolution)
        .bind(s.ops_per_sec)
        .bind(s.hit_ratio)
        .bind(s.used_bytes)
        .bind(s.quota_bytes)
        .bind(s.oom_per_sec)
        .bind(s.p50_us)
        .bind(s.p99_us)
        .execute(&mut **tx)
        .await?;
    for (class, ops) in &s.by_class {
        sqlx::query("INSERT OR REPLACE INTO tenant_class_samples (tenant, at, resolution, class, ops_per_sec) VALUES (?, ?, ?, ?, ?)")
            .bind(tenant)
            .bind(s.at)
            .bind(s.resolution)
            .bind(class)
            .bind(ops)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

fn opt(r: &sqlx::sqlite::SqliteRow, i: usize) -> Option<f64> {
    r.get::<Option<f64>, _>(i)
}

/// A node's samples since `since`, oldest first.
pub async fn node_history(db: &Db, address: &str, since: i64) -> Result<Vec<NodeSample>, DbError> {
    let rows = sqlx::query(&format!("SELECT at, resolution, kind, {NODE_COLUMNS} FROM node_samples WHERE address = ? AND at >= ? ORDER BY at"))
        .bind(address)
        .bind(since)
        .fetch_all(db)
        .await?;
    Ok(rows
        .iter()
        .map(|r| NodeSample {
            at: r.get(0),
            resolution: r.get(1),
            kind: r.get(2),
            ops_per_sec: opt(r, 3),
            hit_ratio: opt(r, 4),
            used_memory: opt(r, 5),
            maxmemory: opt(r, 6),
            evicted_per_sec: opt(r, 7),
            oom_per_sec: opt(r, 8),
            repl_lag: opt(r, 9),
            p50_us: opt(r, 10),
            p99_us: opt(r, 11),
            clients: opt(r, 12),
        })
        .collect())
}

/// A tenant's samples since `since`, oldest first.
pub async fn tenant_history(db: &Db, tenant: &str, since: i64) -> Result<Vec<TenantSample>, DbError> {
    let rows = sqlx::query(&format!("SELECT at, resolution, {TENANT_COLUMNS} FROM tenant_samples WHERE tenant = ? AND at >= ? ORDER BY at"))
        .bind(tenant)
        .bind(since)
        .fetch_all(db)
        .await?;
    let mut out: Vec<TenantSample> = rows
        .iter()
        .map(|r| TenantSample {
            at: r.get(0),
            resolution: r.get(1),
            ops_per_sec: opt(r, 2),
            hit_ratio: opt(r, 3),
            used_bytes: opt(r, 4),
            quota_bytes: opt(r, 5),
            oom_per_sec: opt(r, 6),
            p50_us: opt(r, 7),
            p99_us: opt(r, 8),
            by_class: Default::default(),
        })
        .collect();
    let classes = sqlx::query("SELECT at, class, ops_per_sec FROM tenant_class_samples WHERE tenant = ? AND at >= ? ORDER BY at")
        .bind(tenant)
        .bind(since)
        .fetch_all(db)
        .await?;
    for r in &classes {
        let at: i64 = r.get(0);
        if let Ok(i) = out.binary_search_by_key(&at, |s| s.at) {
            out[i].by_class.insert(r.get(1), r.get(2));
        }
    }
    Ok(out)
}

/// Bounds the history: raw samples older than `RAW_FOR` are averaged into rows of
/// `AVERAGED_SPAN` seconds (only whole spans, so none is averaged twice), and those older
/// than `AVERAGED_FOR` go.
pub async fn downsample_history(db: &Db, now: i64) -> Result<(), DbError> {
    let cutoff = (now - RAW_FOR).div_euclid(AVERAGED_SPAN) * AVERAGED_SPAN;
    let span = AVERAGED_SPAN;
    let avg = |cols: &str| cols.split(", ").map(|c| format!("avg({c})")).collect::<Vec<_>>().join(", ");
    // Averages first (into temporary tables: an averaged row may take the place of a raw
    // one with the same time), then the raw rows go, then the averages go in.
    let mut tx = write(db).await?;
    let averages = [
        format!(
            "CREATE TEMP TABLE node_avg AS SELECT address, (at / {span}) * {span} AS at, {span} AS resolution, max(kind) AS kind, {} FROM node_samples WHERE resolution < {span} AND at < ?1 GROUP BY address, at / {span}",
            avg(NODE_COLUMNS)
        ),
        format!(
            "CREATE TEMP TABLE tenant_avg AS SELECT tenant, (at / {span}) * {span} AS at, {span} AS resolution, {} FROM tenant_samples WHERE resolution < {span} AND at < ?1 GROUP BY tenant, at / {span}",
            avg(TENANT_COLUMNS)
        ),
        // A class missing from a raw sample had no operations then: the span's average counts
        // it as 0 (the sum over the span's samples, divided by their number).
        format!(
            "CREATE TEMP TABLE class_avg AS SELECT c.tenant, (c.at / {span}) * {span} AS at, {span} AS resolution, c.class, sum(c.ops_per_sec) / (SELECT count(*) FROM tenant_samples t WHERE t.tenant = c.tenant AND t.resolution < {span} AND t.at / {span} = c.at / {span}) AS ops_per_sec
             FROM tenant_class_samples c WHERE c.resolution < {span} AND c.at < ?1 GROUP BY c.tenant, c.at / {span}, c.class"
        ),
    ];
    for q in &averages {
        sqlx::query(q).bind(cutoff).execute(&mut *tx).await?;
    }
    for table in ["node_samples", "tenant_samples", "tenant_class_samples"] {
        sqlx::query(&format!("DELETE FROM {table} WHERE resolution < {span} AND at < ?")).bind(cutoff).execute(&mut *tx).await?;
        sqlx::query(&format!("DELETE FROM {table} WHERE at < ?")).bind(now - AVERAGED_FOR).execute(&mut *tx).await?;
    }
    for (table, temp) in [("node_samples", "node_avg"), ("tenant_samples", "tenant_avg"), ("tenant_class_samples", "class_avg")] {
        sqlx::query(&format!("INSERT OR REPLACE INTO {table} SELECT * FROM {temp}")).execute(&mut *tx).await?;
        sqlx::query(&format!("DROP TABLE {temp}")).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
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

// Slot moves.

/// One move of slots between engines (`slot_moves`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct SlotMove {
    pub id: i64,
    /// The addresses of the groups' primaries in the latest attempt.
    pub source: String,
    pub target: String,
    /// The groups the slots move between (None: a move queued before groups had ids, whose
    /// addresses are no longer in the topology).
    pub source_group: Option<i64>,
    pub target_group: Option<i64>,
    pub slots: String,
    pub state: String,
    /// Attempts that failed for a reason of their own (a failover of either side does not
    /// count), and every attempt made (the engines' job is `move-<id>-<runs>`).
    pub attempts: i64,
    pub runs: i64,
    pub keys: i64,
    pub bytes: i64,
    pub pause_ms: Option<i64>,
    pub estimated_keys: Option<i64>,
    pub estimated_bytes: Option<i64>,
    pub error: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// The states a move ends in; any other, it is still to run (queued) or running.
pub const MOVE_ENDED: [&str; 3] = ["done", "failed", "cancelled"];

impl SlotMove {
    pub fn ended(&self) -> bool {
        MOVE_ENDED.contains(&self.state.as_str())
    }
}

/// `MOVE_ENDED` as an SQL list.
fn ended_sql() -> String {
    MOVE_ENDED.iter().map(|s| format!("'{s}'")).collect::<Vec<_>>().join(", ")
}

const MOVE_COLUMNS: &str =
    "id, source, target, slots, state, attempts, keys, bytes, pause_ms, estimated_keys, estimated_bytes, error, created_at, updated_at, source_group, target_group, runs";

fn slot_move(r: &sqlx::sqlite::SqliteRow) -> SlotMove {
    SlotMove {
        id: r.get(0),
        source: r.get(1),
        target: r.get(2),
        slots: r.get(3),
        state: r.get(4),
        attempts: r.get(5),
        keys: r.get(6),
        bytes: r.get(7),
        pause_ms: r.get(8),
        estimated_keys: r.get(9),
        estimated_bytes: r.get(10),
        error: r.get(11),
        created_at: r.get(12),
        updated_at: r.get(13),
        source_group: r.get(14),
        target_group: r.get(15),
        runs: r.get(16),
    }
}

/// A move to queue: between the groups of two slot-map engines (named by their addresses
/// now), with its estimate.
pub struct NewMove {
    pub source: String,
    pub target: String,
    pub slots: String,
    pub estimated_keys: i64,
    pub estimated_bytes: i64,
}

/// Queues moves in order, each naming the groups of its engines; answers their ids, or
/// which address is not a slot-map engine (nothing queued then).
pub async fn queue_moves(db: &Db, moves: &[NewMove]) -> Result<Result<Vec<i64>, String>, DbError> {
    let mut tx = write(db).await?;
    let mut ids = Vec::new();
    for NewMove { source, target, slots, estimated_keys: keys, estimated_bytes: bytes } in moves {
        let mut groups = Vec::new();
        for address in [source, target] {
            match sqlx::query("SELECT group_id FROM engines WHERE address = ?").bind(address).fetch_optional(&mut *tx).await? {
                Some(r) => groups.push(r.get::<i64, _>(0)),
                None => return Ok(Err(format!("no engine {address} in the slot map"))),
            }
        }
        let row = sqlx::query(
            "INSERT INTO slot_moves (source, target, source_group, target_group, slots, state, estimated_keys, estimated_bytes, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?) RETURNING id",
        )
        .bind(source)
        .bind(target)
        .bind(groups[0])
        .bind(groups[1])
        .bind(slots)
        .bind(keys)
        .bind(bytes)
        .bind(now())
        .bind(now())
        .fetch_one(&mut *tx)
        .await?;
        ids.push(row.get(0));
    }
    tx.commit().await?;
    Ok(Ok(ids))
}

/// The newest `limit` moves, newest first.
pub async fn moves(db: &Db, limit: i64) -> Result<Vec<SlotMove>, DbError> {
    let rows = sqlx::query(&format!("SELECT {MOVE_COLUMNS} FROM slot_moves ORDER BY id DESC LIMIT ?")).bind(limit).fetch_all(db).await?;
    Ok(rows.iter().map(slot_move).collect())
}

pub async fn slot_move_by_id(db: &Db, id: i64) -> Result<Option<SlotMove>, DbError> {
    let row = sqlx::query(&format!("SELECT {MOVE_COLUMNS} FROM slot_moves WHERE id = ?")).bind(id).fetch_optional(db).await?;
    Ok(row.as_ref().map(slot_move))
}

/// The move to run next: the oldest one not finished.
pub async fn next_move(db: &Db) -> Result<Option<SlotMove>, DbError> {
    let row =
        sqlx::query(&format!("SELECT {MOVE_COLUMNS} FROM slot_moves WHERE state NOT IN ({}) ORDER BY id LIMIT 1", ended_sql())).fetch_optional(db).await?;
    Ok(row.as_ref().map(slot_move))
}

/// Records a move's progress.
pub async fn update_move(db: &Db, m: &SlotMove) -> Result<(), DbError> {
    sqlx::query("UPDATE slot_moves SET state = ?, source = ?, target = ?, attempts = ?, runs = ?, keys = ?, bytes = ?, pause_ms = ?, error = ?, updated_at = ? WHERE id = ?")
        .bind(&m.state)
        .bind(&m.source)
        .bind(&m.target)
        .bind(m.attempts)
        .bind(m.runs)
        .bind(m.keys)
        .bind(m.bytes)
        .bind(m.pause_ms)
        .bind(&m.error)
        .bind(now())
        .bind(m.id)
        .execute(db)
        .await?;
    Ok(())
}

/// Cancels the moves not started yet; answers how many.
pub async fn cancel_queued_moves(db: &Db) -> Result<u64, DbError> {
    let r = sqlx::query("UPDATE slot_moves SET state = 'cancelled', updated_at = ? WHERE state = 'queued' AND runs = 0").bind(now()).execute(db).await?;
    Ok(r.rows_affected())
}

/// Gives `slots` (a slot set's ranges) to group `target_group` and records the move as
/// switched, in one transaction: the slot map and the move never disagree.
pub async fn switch_slots(db: &Db, slots: &[(u16, u16)], target_group: i64, move_id: i64) -> Result<(), DbError> {
    let mut tx = write(db).await?;
    let target = sqlx::query("SELECT idx FROM engines WHERE group_id = ?").bind(target_group).fetch_one(&mut *tx).await?.get::<i64, _>(0) as usize;
    let rows = sqlx::query("SELECT first_slot, last_slot, engine FROM slot_ranges").fetch_all(&mut *tx).await?;
    let mut owner = vec![usize::MAX; 16384];
    for r in &rows {
        let (f, l, e): (i64, i64, i64) = (r.get(0), r.get(1), r.get(2));
        for s in f..=l {
            owner[s as usize] = e as usize;
        }
    }
    for (f, l) in slots {
        for s in *f..=*l {
            owner[s as usize] = target;
        }
    }
    sqlx::query("DELETE FROM slot_ranges").execute(&mut *tx).await?;
    let mut start = 0;
    for s in 1..=owner.len() {
        if s == owner.len() || owner[s] != owner[start] {
            sqlx::query("INSERT INTO slot_ranges (first_slot, last_slot, engine) VALUES (?, ?, ?)")
                .bind(start as i64)
                .bind((s - 1) as i64)
                .bind(owner[start] as i64)
                .execute(&mut *tx)
                .await?;
            start = s;
        }
    }
    sqlx::query("UPDATE slot_moves SET state = 'switched', updated_at = ? WHERE id = ?").bind(now()).bind(move_id).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(())
}

/// Adds an engine at the end of the slot map, owning no slot yet, with its replicas;
/// answers its index.
pub async fn add_engine(db: &Db, address: &str, replicas: &[String]) -> Result<Result<usize, String>, DbError> {
    let all: Vec<&str> = std::iter::once(address).chain(replicas.iter().map(String::as_str)).collect();
    if let Some(a) = all.iter().enumerate().find(|(i, a)| all[..*i].contains(a)).map(|(_, a)| a) {
        return Ok(Err(format!("{a} is named twice")));
    }
    let mut tx = write(db).await?;
    for a in all {
        let taken: i64 = sqlx::query("SELECT (SELECT COUNT(*) FROM engines WHERE address = ?1) + (SELECT COUNT(*) FROM replicas WHERE address = ?1)")
            .bind(a)
            .fetch_one(&mut *tx)
            .await?
            .get(0);
        if taken > 0 {
            return Ok(Err(format!("{a} is already an engine or a replica of the topology")));
        }
    }
    let idx: i64 = sqlx::query("SELECT COALESCE(MAX(idx) + 1, 0) FROM engines").fetch_one(&mut *tx).await?.get(0);
    let group = new_group_id(&mut tx).await?;
    sqlx::query("INSERT INTO engines (idx, address, group_id) VALUES (?, ?, ?)").bind(idx).bind(address).bind(group).execute(&mut *tx).await?;
    for r in replicas {
        sqlx::query("INSERT INTO replicas (address, engine) VALUES (?, ?)").bind(r).bind(idx).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(Ok(idx as usize))
}

/// Removes an engine that owns no slot, with its replicas (answered); the engines after it
/// move up one place (their slot ranges and replicas with them).
pub async fn remove_engine(db: &Db, address: &str) -> Result<Result<Vec<String>, String>, DbError> {
    let mut tx = write(db).await?;
    // The engines after it are renumbered with their ranges and replicas: the references
    // hold again at commit.
    sqlx::query("PRAGMA defer_foreign_keys = ON").execute(&mut *tx).await?;
    let Some(row) = sqlx::query("SELECT idx, group_id FROM engines WHERE address = ?").bind(address).fetch_optional(&mut *tx).await? else {
        return Ok(Err(format!("no engine {address} in the slot map")));
    };
    let (idx, group): (i64, i64) = (row.get(0), row.get(1));
    let owned: i64 = sqlx::query("SELECT COUNT(*) FROM slot_ranges WHERE engine = ?").bind(idx).fetch_one(&mut *tx).await?.get(0);
    if owned > 0 {
        return Ok(Err(format!("engine {address} still owns slots: drain it first")));
    }
    let pending: i64 =
        sqlx::query(&format!("SELECT COUNT(*) FROM slot_moves WHERE state NOT IN ({}) AND (source_group = ?1 OR target_group = ?1)", ended_sql()))
            .bind(group)
            .fetch_one(&mut *tx)
            .await?
            .get(0);
    if pending > 0 {
        return Ok(Err(format!("engine {address} has slot moves not finished")));
    }
    let replicas: Vec<String> =
        sqlx::query("SELECT address FROM replicas WHERE engine = ?").bind(idx).fetch_all(&mut *tx).await?.iter().map(|r| r.get(0)).collect();
    sqlx::query("DELETE FROM replicas WHERE engine = ?").bind(idx).execute(&mut *tx).await?;
    sqlx::query("DELETE FROM engines WHERE idx = ?").bind(idx).execute(&mut *tx).await?;
    let last: i64 = sqlx::query("SELECT COALESCE(MAX(idx), -1) FROM engines").fetch_one(&mut *tx).await?.get(0);
    for i in idx + 1..=last {
        sqlx::query("UPDATE engines SET idx = ? WHERE idx = ?").bind(i - 1).bind(i).execute(&mut *tx).await?;
        sqlx::query("UPDATE slot_ranges SET engine = ? WHERE engine = ?").bind(i - 1).bind(i).execute(&mut *tx).await?;
        sqlx::query("UPDATE replicas SET engine = ? WHERE engine = ?").bind(i - 1).bind(i).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(Ok(replicas))
}

pub async fn setting(db: &Db, name: &str) -> Result<Option<String>, DbError> {
    Ok(sqlx::query("SELECT value FROM settings WHERE name = ?").bind(name).fetch_optional(db).await?.map(|r| r.get(0)))
}

pub async fn set_setting(db: &Db, name: &str, value: &str) -> Result<(), DbError> {
    sqlx::query("INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value")
        .bind(name)
        .bind(value)
        .execute(db)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_token_past_its_expiry_or_revoked_is_refused() {
        let dir = std::env::temp_dir().join(format!("terrace-console-tokens-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let db = open(&dir.join("console.db")).await.unwrap();
        let token = |name, role, expires_at, tenant| NewToken { name, role, expires_at, created_by: "user admin", tenant };
        add_token(&db, "h1", "p1", &token("live", "viewer", Some(now() + 60), None)).await.unwrap();
        add_token(&db, "h2", "p2", &token("expired", "admin", Some(now() - 1), None)).await.unwrap();
        let forever = add_token(&db, "h3", "p3", &token("forever", "operator", None, Some("shop"))).await.unwrap();
        assert_eq!(token_valid(&db, "h1").await.unwrap(), Some(("live".into(), "viewer".into(), None)));
        assert_eq!(token_valid(&db, "h2").await.unwrap(), None, "expired");
        assert_eq!(token_valid(&db, "h3").await.unwrap(), Some(("forever".into(), "operator".into(), Some("shop".into()))));
        revoke_token(&db, forever).await.unwrap();
        assert_eq!(token_valid(&db, "h3").await.unwrap(), None, "revoked");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn old_samples_are_averaged_into_five_minute_rows_and_the_oldest_go() {
        let dir = std::env::temp_dir().join(format!("terrace-console-history-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let db = open(&dir.join("console.db")).await.unwrap();
        let now = 40 * 86_400;
        let old = now - RAW_FOR - 3 * AVERAGED_SPAN; // a whole span, more than a day ago
        let span_start = old.div_euclid(AVERAGED_SPAN) * AVERAGED_SPAN;
        for (i, ops) in [10.0, 20.0, 30.0].into_iter().enumerate() {
            let at = span_start + 10 * i as i64;
            let s = NodeSample { at, resolution: 10, kind: "engine".into(), ops_per_sec: Some(ops), ..Default::default() };
            add_node_sample(&db, "e:1", &s).await.unwrap();
            let mut t = TenantSample { at, resolution: 10, ops_per_sec: Some(ops), ..Default::default() };
            if i != 1 {
                t.by_class.insert("string".into(), ops); // (none in the second sample)
            }
            add_tenant_sample(&db, "shop", &t).await.unwrap();
        }
        let recent = NodeSample { at: now - 60, resolution: 10, kind: "engine".into(), ops_per_sec: Some(5.0), ..Default::default() };
        add_node_sample(&db, "e:1", &recent).await.unwrap();
        let ancient = NodeSample { at: now - AVERAGED_FOR - 1, resolution: AVERAGED_SPAN, kind: "engine".into(), ..Default::default() };
        add_node_sample(&db, "e:1", &ancient).await.unwrap();
        downsample_history(&db, now).await.unwrap();
        downsample_history(&db, now).await.unwrap(); // (twice: nothing averaged twice)
        let nodes = node_history(&db, "e:1", 0).await.unwrap();
        let got: Vec<(i64, i64, Option<f64>)> = nodes.iter().map(|s| (s.at, s.resolution, s.ops_per_sec)).collect();
        assert_eq!(got, [(span_start, AVERAGED_SPAN, Some(20.0)), (now - 60, 10, Some(5.0))], "averaged, the recent one kept raw, the ancient one gone");
        let tenants = tenant_history(&db, "shop", 0).await.unwrap();
        assert_eq!(tenants.len(), 1);
        assert_eq!(tenants[0].ops_per_sec, Some(20.0));
        assert_eq!(tenants[0].by_class.get("string"), Some(&((10.0 + 30.0) / 3.0)), "a sample without the class counts as 0");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
