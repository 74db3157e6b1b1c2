//! The console state several consoles share, as one JSON document: the tables a standby
//! mirrors from etcd and a coordinator publishes there (`coordination`). Users, API
//! tokens, tenants, the topology (engines and their group ids, slot ranges, replicas,
//! proxies), slot moves, settings, dropped tenants, the advisor's state and retrains.
//! Each console keeps its own sessions (logins), events and history.
//!
//! Taken and applied with SQLite's JSON functions over the tables' own columns (read from
//! `PRAGMA table_info`), so a migration that adds a column needs nothing here.

use sqlx::Row;

use crate::db::{Db, DbError};

/// The shared tables (every row of each), parents before children.
const SHARED: [&str; 13] = [
    "users",
    "api_tokens",
    "tenants",
    "engine_group_ids",
    "engines",
    "slot_ranges",
    "replicas",
    "proxies",
    "slot_moves",
    "settings",
    "dropped_tenants",
    "advisor_state",
    "retrains",
];

/// A table's columns, and its primary key's.
async fn columns(db: &Db, table: &str) -> Result<(Vec<String>, String), DbError> {
    let rows = sqlx::query(&format!("PRAGMA table_info({table})")).fetch_all(db).await?;
    let names: Vec<String> = rows.iter().map(|r| r.get::<String, _>("name")).collect();
    let pk = rows.iter().find(|r| r.get::<i64, _>("pk") == 1).map(|r| r.get::<String, _>("name")).unwrap_or_else(|| "rowid".into());
    Ok((names, pk))
}

/// The shared state now, as JSON (the same state gives the same text).
pub async fn take(db: &Db) -> Result<String, DbError> {
    let mut parts = Vec::new();
    for table in SHARED {
        let (cols, pk) = columns(db, table).await?;
        let object = cols.iter().map(|c| format!("'{c}', {c}")).collect::<Vec<_>>().join(", ");
        let sql = format!("SELECT COALESCE(json_group_array(json(row)), '[]') FROM (SELECT json_object({object}) AS row FROM {table} ORDER BY {pk})");
        let rows: String = sqlx::query(&sql).fetch_one(db).await?.get(0);
        parts.push(format!("\"{table}\":{rows}"));
    }
    Ok(format!("{{{}}}", parts.join(",")))
}

/// Makes the shared tables hold `state` (a `take` of another console), in one transaction.
/// Users are updated in place (a console's sessions hang on them: those of a user removed,
/// or whose password changed, go); the other tables are replaced whole.
pub async fn apply(db: &Db, state: &str) -> Result<(), DbError> {
    let mut tables = Vec::new();
    for table in SHARED {
        tables.push((table, columns(db, table).await?));
    }
    let mut tx = db.begin_with("BEGIN IMMEDIATE").await?;
    sqlx::query("PRAGMA defer_foreign_keys = ON").execute(&mut *tx).await?;
    // Children before parents when deleting.
    for table in SHARED.iter().rev().filter(|t| **t != "users") {
        sqlx::query(&format!("DELETE FROM {table}")).execute(&mut *tx).await?;
    }
    for (table, (cols, pk)) in tables {
        let list = cols.join(", ");
        let values = cols.iter().map(|c| format!("json_extract(value, '$.{c}')")).collect::<Vec<_>>().join(", ");
        let rows_of = format!("json_each(?, '$.{table}')");
        if table == "users" {
            // A password changed on the coordinator logs its user out here too, as there.
            sqlx::query(&format!(
                "DELETE FROM sessions WHERE user_id IN (SELECT u.id FROM users u JOIN {rows_of} j ON json_extract(j.value, '$.id') = u.id \
                 WHERE json_extract(j.value, '$.password_hash') IS NOT u.password_hash)"
            ))
            .bind(state)
            .execute(&mut *tx)
            .await?;
            sqlx::query(&format!("DELETE FROM users WHERE {pk} NOT IN (SELECT json_extract(value, '$.{pk}') FROM {rows_of})"))
                .bind(state)
                .execute(&mut *tx)
                .await?;
            let set = cols.iter().filter(|c| **c != pk).map(|c| format!("{c} = excluded.{c}")).collect::<Vec<_>>().join(", ");
            sqlx::query(&format!("INSERT INTO users ({list}) SELECT {values} FROM {rows_of} WHERE true ON CONFLICT({pk}) DO UPDATE SET {set}"))
                .bind(state)
                .execute(&mut *tx)
                .await?;
        } else {
            sqlx::query(&format!("INSERT INTO {table} ({list}) SELECT {values} FROM {rows_of}")).bind(state).execute(&mut *tx).await?;
        }
    }
    tx.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn fresh(tag: &str) -> (Db, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("terrace-shared-state-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        (crate::db::open(&dir.join("console.db")).await.unwrap(), dir)
    }

    #[tokio::test]
    async fn a_standby_holds_what_the_coordinator_took_and_keeps_its_own_sessions() {
        let (coordinator, dir_a) = fresh("a").await;
        let (standby, dir_b) = fresh("b").await;
        for db in [&coordinator, &standby] {
            crate::db::seed_topology(db, &["10.0.0.1:7001".into(), "10.0.0.2:7001".into()], &["10.0.0.3:7001".into()], &["10.0.0.9:6379".into()], false)
                .await
                .unwrap();
            crate::db::add_user(db, "admin", "hash-1", "admin", None).await.unwrap();
        }
        crate::db::add_user(&coordinator, "ops", "hash-2", "operator", None).await.unwrap();
        crate::db::decide_failover(&coordinator, 0, "10.0.0.1:7001", "10.0.0.3:7001").await.unwrap();
        let (admin, _) = crate::db::user_by_name(&standby, "admin").await.unwrap().unwrap();
        crate::db::add_session(&standby, "session-1", admin, "csrf", crate::db::now() + 60).await.unwrap();

        let state = take(&coordinator).await.unwrap();
        apply(&standby, &state).await.unwrap();
        assert_eq!(take(&standby).await.unwrap(), state, "the standby holds exactly the coordinator's state");
        assert_eq!(crate::db::topology(&standby).await.unwrap().0, ["10.0.0.3:7001", "10.0.0.2:7001"]);
        assert!(crate::db::session(&standby, "session-1").await.unwrap().is_some(), "its own session stays");
        // The admin's password changes on the coordinator: logged out on the standby too.
        crate::db::set_password(&coordinator, admin, "hash-3", "").await.unwrap();
        apply(&standby, &take(&coordinator).await.unwrap()).await.unwrap();
        assert!(crate::db::session(&standby, "session-1").await.unwrap().is_none());
        for dir in [dir_a, dir_b] {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
