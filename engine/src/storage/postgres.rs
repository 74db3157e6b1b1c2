//! The PostgreSQL storage adapter (sqlx, queries checked at run time): one table keyed by
//! (tenant, key). It works against anything that speaks PostgreSQL's wire protocol and SQL
//! dialect (CockroachDB, YugabyteDB, Citus), which is how the storage tier grows past one
//! machine.
//!
//! A write batch is one transaction: the puts as one `INSERT … SELECT FROM UNNEST …
//! ON CONFLICT DO UPDATE`, the deletes as one `DELETE … = ANY(…)` (several writes to one key
//! in a batch are coalesced first: the last one wins). Reads are one `= ANY(…)` query per
//! batch. Lost connections are `Unavailable`; the pool reconnects when the server is back.
//!
//! Fences (`super::Term`) are rows of `terrace_fences`. A write of a term reads its group's
//! row FOR SHARE inside its transaction and gives up if the epoch there is newer (raising it
//! first if it is older: the first write of a term); raising a fence updates the row, so it
//! waits for the writes holding it and every later write of an older term sees the new epoch.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::Row;

use super::{BoxFut, Op, Pairs, Storage, StorageAdapter, StorageError, Term, Values};

/// A term's epoch as PostgreSQL's bigint.
fn epoch_of(term: &Term) -> Result<i64, StorageError> {
    i64::try_from(term.epoch).map_err(|_| StorageError::Backend(format!("epoch {} does not fit PostgreSQL's bigint", term.epoch)))
}

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS terrace_kv (
    tenant text NOT NULL,
    key bytea NOT NULL,
    value bytea NOT NULL,
    PRIMARY KEY (tenant, key)
)";

/// Each slot range's fence: the newest primary term's epoch (`super::Term`).
const FENCES: &str = "CREATE TABLE IF NOT EXISTS terrace_fences (
    grp text PRIMARY KEY,
    epoch bigint NOT NULL
)";

/// Raises a group's fence to an epoch (never lowers it); answers the epoch it holds then.
/// The row stays locked until the transaction ends: a write of the group's older term in
/// flight (holding it FOR SHARE) finishes first, and none starts after.
const RAISE: &str = "INSERT INTO terrace_fences (grp, epoch) VALUES ($1, $2) \
     ON CONFLICT (grp) DO UPDATE SET epoch = GREATEST(terrace_fences.epoch, EXCLUDED.epoch) RETURNING epoch";

pub struct Postgres {
    pool: PgPool,
}

fn classify(e: sqlx::Error) -> StorageError {
    match e {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Tls(_) => StorageError::Unavailable(format!("postgres: {e}")),
        other => StorageError::Backend(format!("postgres: {other}")),
    }
}

/// Connects to `url` (`postgres://user:pass@host:port/db`), creates the table if missing,
/// and returns the storage with its runtime. An unreachable server is an error here: the
/// engine does not start on a storage tier it cannot reach.
pub fn connect(url: &str) -> Result<Storage, StorageError> {
    let rt = super::runtime().map_err(|e| StorageError::Backend(format!("storage runtime: {e}")))?;
    let pool = rt.block_on(async {
        let pool = PgPoolOptions::new().max_connections(8).acquire_timeout(Duration::from_secs(3)).connect(url).await.map_err(classify)?;
        sqlx::query(SCHEMA).execute(&pool).await.map_err(classify)?;
        sqlx::query(FENCES).execute(&pool).await.map_err(classify)?;
        Ok::<_, StorageError>(pool)
    })?;
    Ok(Storage::from_parts(Arc::new(Postgres { pool }), rt))
}

/// The last write to each key of a batch, in key order: every writer then locks rows in the
/// same order, so concurrent batches (several engines on one database) cannot deadlock.
fn coalesce(ops: &[Op]) -> Vec<&Op> {
    let mut last: std::collections::HashMap<&[u8], usize> = std::collections::HashMap::with_capacity(ops.len());
    for (i, (k, _)) in ops.iter().enumerate() {
        last.insert(k.as_slice(), i);
    }
    let mut kept: Vec<&Op> = ops.iter().enumerate().filter(|(i, (k, _))| last[k.as_slice()] == *i).map(|(_, op)| op).collect();
    kept.sort_by(|a, b| a.0.cmp(&b.0));
    kept
}

/// Creates database `name` on the server of `url` unless it exists; returns `url` pointing at
/// it (benchmarks give each engine a database of its own).
pub fn create_database(url: &str, name: &str) -> Result<String, StorageError> {
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(StorageError::Backend(format!("'{name}' is not a plain database name")));
    }
    let rt = super::runtime().map_err(|e| StorageError::Backend(format!("storage runtime: {e}")))?;
    rt.block_on(async {
        let pool = PgPoolOptions::new().max_connections(1).connect(url).await.map_err(classify)?;
        let exists = sqlx::query("SELECT 1 FROM pg_database WHERE datname = $1").bind(name).fetch_optional(&pool).await.map_err(classify)?.is_some();
        if !exists {
            sqlx::query(&format!("CREATE DATABASE {name}")).execute(&pool).await.map_err(classify)?;
        }
        Ok::<_, StorageError>(())
    })?;
    let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    // scheme://authority[/database]: keep scheme and authority.
    let authority_at = base.find("://").map_or(0, |i| i + 3);
    let server = match base[authority_at..].find('/') {
        Some(slash) => &base[..authority_at + slash],
        None => base,
    };
    Ok(match query {
        Some(q) => format!("{server}/{name}?{q}"),
        None => format!("{server}/{name}"),
    })
}

impl StorageAdapter for Postgres {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn shared(&self) -> bool {
        true
    }

    fn get<'a>(&'a self, tenant: &'a str, keys: &'a [Vec<u8>]) -> BoxFut<'a, Result<Values, StorageError>> {
        Box::pin(async move {
            let rows = sqlx::query("SELECT key, value FROM terrace_kv WHERE tenant = $1 AND key = ANY($2)")
                .bind(tenant)
                .bind(keys)
                .fetch_all(&self.pool)
                .await
                .map_err(classify)?;
            let mut found: std::collections::HashMap<Vec<u8>, Vec<u8>> = std::collections::HashMap::with_capacity(rows.len());
            for r in rows {
                found.insert(r.try_get("key").map_err(classify)?, r.try_get("value").map_err(classify)?);
            }
            Ok(keys.iter().map(|k| found.get(k).cloned()).collect())
        })
    }

    fn fence<'a>(&'a self, term: &'a Term) -> BoxFut<'a, Result<(), StorageError>> {
        Box::pin(async move {
            let held: i64 = sqlx::query_scalar(RAISE).bind(&term.group).bind(epoch_of(term)?).fetch_one(&self.pool).await.map_err(classify)?;
            if held as u64 > term.epoch {
                return Err(term.fenced(held as u64));
            }
            Ok(())
        })
    }

    fn write<'a>(&'a self, tenant: &'a str, ops: Vec<Op>, term: Option<&'a Term>) -> BoxFut<'a, Result<(), StorageError>> {
        Box::pin(async move {
            let ops = coalesce(&ops);
            let (mut put_keys, mut put_values, mut deletes) = (Vec::new(), Vec::new(), Vec::new());
            for (k, v) in ops {
                match v {
                    Some(v) => {
                        put_keys.push(k.as_slice());
                        put_values.push(v.as_slice());
                    }
                    None => deletes.push(k.as_slice()),
                }
            }
            let mut tx = self.pool.begin().await.map_err(classify)?;
            if let Some(term) = term {
                let held: Option<i64> = sqlx::query_scalar("SELECT epoch FROM terrace_fences WHERE grp = $1 FOR SHARE")
                    .bind(&term.group)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(classify)?;
                let held = match held {
                    Some(e) if e as u64 >= term.epoch => e as u64,
                    // The term's first write: its fence was not raised yet (or not here).
                    _ => sqlx::query_scalar::<_, i64>(RAISE).bind(&term.group).bind(epoch_of(term)?).fetch_one(&mut *tx).await.map_err(classify)? as u64,
                };
                if held > term.epoch {
                    return Err(term.fenced(held));
                }
            }
            if !put_keys.is_empty() {
                sqlx::query(
                    "INSERT INTO terrace_kv (tenant, key, value) SELECT $1, k, v FROM UNNEST($2::bytea[], $3::bytea[]) AS t(k, v) \
                     ON CONFLICT (tenant, key) DO UPDATE SET value = EXCLUDED.value",
                )
                .bind(tenant)
                .bind(&put_keys)
                .bind(&put_values)
                .execute(&mut *tx)
                .await
                .map_err(classify)?;
            }
            if !deletes.is_empty() {
                sqlx::query("DELETE FROM terrace_kv WHERE tenant = $1 AND key = ANY($2)")
                    .bind(tenant)
                    .bind(&deletes)
                    .execute(&mut *tx)
                    .await
                    .map_err(classify)?;
            }
            tx.commit().await.map_err(classify)
        })
    }

    fn scan<'a>(&'a self, tenant: &'a str, after: Option<&'a [u8]>, limit: usize) -> BoxFut<'a, Result<Pairs, StorageError>> {
        Box::pin(async move {
            let rows = match after {
                Some(a) => sqlx::query("SELECT key, value FROM terrace_kv WHERE tenant = $1 AND key > $2 ORDER BY key LIMIT $3")
                    .bind(tenant)
                    .bind(a)
                    .bind(limit as i64),
                None => sqlx::query("SELECT key, value FROM terrace_kv WHERE tenant = $1 ORDER BY key LIMIT $2").bind(tenant).bind(limit as i64),
            }
            .fetch_all(&self.pool)
            .await
            .map_err(classify)?;
            rows.into_iter().map(|r| Ok((r.try_get("key").map_err(classify)?, r.try_get("value").map_err(classify)?))).collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalescing_keeps_the_last_write_per_key() {
        let ops: Vec<Op> =
            vec![(b"a".to_vec(), Some(b"1".to_vec())), (b"b".to_vec(), Some(b"x".to_vec())), (b"a".to_vec(), None), (b"b".to_vec(), Some(b"y".to_vec()))];
        let kept = coalesce(&ops);
        assert_eq!(kept, vec![&ops[2], &ops[3]]);
    }
}
