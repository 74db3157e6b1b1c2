//! The console's operations, shared by the pages and the REST API: tenants (stored, then
//! pushed at once by a reconcile pass), retraining, statistics, advice and applying it.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::db::{self, DbError};
use crate::nodes::Node;
use crate::reconcile;
use crate::tenants::{Tenant, TenantInput};
use crate::Console;

#[derive(Debug, thiserror::Error)]
pub enum OpError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Unavailable(String),
    #[error(transparent)]
    Db(#[from] DbError),
}

/// A node that failed or refused: the operation could not be done there (502).
impl From<crate::nodes::NodeError> for OpError {
    fn from(e: crate::nodes::NodeError) -> OpError {
        OpError::Unavailable(e.to_string())
    }
}

impl OpError {
    /// The HTTP status it answers with (pages and API alike).
    pub fn status(&self) -> axum::http::StatusCode {
        use axum::http::StatusCode;
        match self {
            OpError::NotFound(_) => StatusCode::NOT_FOUND,
            OpError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            OpError::Conflict(_) => StatusCode::CONFLICT,
            OpError::Unavailable(_) => StatusCode::BAD_GATEWAY,
            OpError::Db(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// A tenant saved, and what pushing it met (engines down, an engine refusing a setting).
pub struct Saved {
    pub tenant: Tenant,
    pub problems: Vec<String>,
}

async fn push(console: &Console) -> Vec<String> {
    reconcile::pass(console).await.errors
}

/// Pushes a tenant just saved; if a node refuses it (not merely is down), `undo` restores
/// what was stored before, that is pushed again, and the refusal is the error.
async fn push_or_undo<F: std::future::Future<Output = Result<(), OpError>>>(console: &Console, undo: F) -> Result<Vec<String>, OpError> {
    let outcome = reconcile::pass(console).await;
    if outcome.refused.is_empty() {
        return Ok(outcome.errors);
    }
    undo.await?;
    let again = reconcile::pass(console).await;
    if !again.refused.is_empty() {
        tracing::warn!(refused = ?again.refused, "nodes still refuse the restored state");
    }
    Err(OpError::Invalid(format!("not applied, nothing changed: {}", outcome.refused.join("; "))))
}

pub async fn tenant(console: &Console, name: &str) -> Result<Tenant, OpError> {
    db::tenant(&console.db, name).await?.ok_or_else(|| OpError::NotFound(format!("no tenant '{name}'")))
}

/// `input` applied to `base` off the async workers (a new password is hashed with argon2).
async fn applied(input: &TenantInput, base: Option<Tenant>) -> Result<Tenant, OpError> {
    let input = input.clone();
    let now = db::now();
    let t =
        tokio::task::spawn_blocking(move || input.apply(base.as_ref(), now)).await.map_err(|e| OpError::Invalid(format!("applying the tenant failed: {e}")))?;
    t.map_err(|e| OpError::Invalid(e.to_string()))
}

pub async fn create_tenant(console: &Console, input: &TenantInput) -> Result<Saved, OpError> {
    let t = applied(input, None).await?;
    check_port(console, &t)?;
    db::save_tenant(&console.db, &t, true).await?.map_err(OpError::Conflict)?;
    let problems = push_or_undo(console, async {
        db::delete_tenant(&console.db, &t.name).await?;
        Ok(())
    })
    .await?;
    Ok(Saved { problems, tenant: t })
}

pub async fn update_tenant(console: &Console, name: &str, input: &TenantInput) -> Result<Saved, OpError> {
    let current = tenant(console, name).await?;
    if input.name.as_ref().is_some_and(|n| n != name) {
        return Err(OpError::Invalid("name: a tenant cannot be renamed (its data lives under its name)".into()));
    }
    let t = applied(input, Some(current.clone())).await?;
    check_port(console, &t)?;
    db::save_tenant(&console.db, &t, false).await?.map_err(OpError::Conflict)?;
    let problems = push_or_undo(console, async {
        db::save_tenant(&console.db, &current, false).await?.map_err(OpError::Conflict)?;
        Ok(())
    })
    .await?;
    Ok(Saved { problems, tenant: t })
}

fn check_port(console: &Console, t: &Tenant) -> Result<(), OpError> {
    if let Some(p) = t.memcache_port {
        let taken = console.config.proxies.iter().chain(&console.config.engines).any(|a| a.rsplit_once(':').is_some_and(|(_, port)| port == p.to_string()));
        if taken || p == console.config.port {
            return Err(OpError::Conflict(format!("memcache_port {p} is a port of the appliance itself")));
        }
    }
    Ok(())
}

/// Deletes the tenant: the proxies stop accepting it (and every engine stops being given
/// it: the pass below runs after any pass that still had it), then every engine drops its
/// namespace — keys, stored rows, clients, settings — and frees the number for the next
/// tenant (`TERRACE.DROPNAMESPACE`, which replicas follow). Answers the engines that could
/// not drop it (their data stays until the tenant is deleted again).
pub async fn delete_tenant(console: &Console, name: &str) -> Result<Vec<String>, OpError> {
    if !db::delete_tenant(&console.db, name).await? {
        return Err(OpError::NotFound(format!("no tenant '{name}'")));
    }
    let mut problems: Vec<String> = push(console).await.into_iter().filter(|p| p.starts_with("proxy")).collect();
    let (engines, _) = db::topology(&console.db).await?;
    for addr in &engines {
        let dropped = async {
            let mut n = Node::engine(addr, &console.config.engine_auth).await?;
            n.run::<i64>(&["TERRACE.DROPNAMESPACE", name]).await
        }
        .await;
        if let Err(e) = dropped {
            problems.push(format!("engine {addr}: namespace not dropped: {e}"));
        }
    }
    Ok(problems)
}

/// The tenant a new user or token is scoped to, checked: an existing tenant, and a role short
/// of admin (an admin manages users and tokens, which are the whole appliance's).
async fn scope_of(console: &Console, tenant: Option<&str>, role: crate::auth::Role) -> Result<Option<String>, OpError> {
    let Some(tenant) = tenant.map(str::trim).filter(|t| !t.is_empty()) else { return Ok(None) };
    if db::tenant(&console.db, tenant).await?.is_none() {
        return Err(OpError::Invalid(format!("tenant: no tenant '{tenant}'")));
    }
    if role == crate::auth::Role::Admin {
        return Err(OpError::Invalid("role: one tenant's people are viewers or operators, not admins".into()));
    }
    Ok(Some(tenant.to_string()))
}

/// Adds a user (admins only: the web layer checks) with a password and a role, scoped to
/// `tenant` when given (its own people: they see and manage that tenant alone).
pub async fn create_user(console: &Console, name: &str, password: &str, role: &str, tenant: Option<&str>) -> Result<crate::db::User, OpError> {
    let name = name.trim();
    if !terrace_commands::settings::valid_name(name) {
        return Err(OpError::Invalid(format!("name: '{name}' is not a user name (1-64 letters, digits, '_' and '-')")));
    }
    if password.len() < 8 {
        return Err(OpError::Invalid("password: at least 8 characters".into()));
    }
    let role = crate::auth::Role::parse(role.trim())
        .ok_or_else(|| OpError::Invalid(format!("role: '{role}' is not one of {}", crate::auth::Role::NAMES.join(", "))))?;
    let tenant = scope_of(console, tenant, role).await?;
    let pw = password.to_string();
    let hash = tokio::task::spawn_blocking(move || crate::auth::hash_password(&pw)).await.map_err(|e| OpError::Unavailable(e.to_string()))?;
    if !db::add_user(&console.db, name, &hash, role.name(), tenant.as_deref()).await? {
        return Err(OpError::Conflict(format!("a user named '{name}' exists")));
    }
    db::user(&console.db, name).await?.ok_or_else(|| OpError::NotFound(format!("no user '{name}'")))
}

/// Changes a user's role; the last admin stays one.
pub async fn set_user_role(console: &Console, name: &str, role: &str) -> Result<crate::db::User, OpError> {
    let role = crate::auth::Role::parse(role.trim())
        .ok_or_else(|| OpError::Invalid(format!("role: '{role}' is not one of {}", crate::auth::Role::NAMES.join(", "))))?;
    let user = db::user(&console.db, name).await?.ok_or_else(|| OpError::NotFound(format!("no user '{name}'")))?;
    if user.tenant.is_some() && role == crate::auth::Role::Admin {
        return Err(OpError::Invalid(format!("role: '{name}' is one tenant's user: a viewer or an operator, not an admin")));
    }
    if user.role == "admin" && role != crate::auth::Role::Admin && db::admin_count(&console.db).await? <= 1 {
        return Err(OpError::Conflict(format!("'{name}' is the last admin: make another user admin first")));
    }
    db::set_role(&console.db, name, role.name()).await?;
    db::user(&console.db, name).await?.ok_or_else(|| OpError::NotFound(format!("no user '{name}'")))
}

/// Deletes a user (not oneself, not the last admin); its sessions end.
pub async fn delete_user(console: &Console, name: &str, by: &str) -> Result<(), OpError> {
    let user = db::user(&console.db, name).await?.ok_or_else(|| OpError::NotFound(format!("no user '{name}'")))?;
    if name == by {
        return Err(OpError::Conflict("you cannot delete yourself".into()));
    }
    if user.role == "admin" && db::admin_count(&console.db).await? <= 1 {
        return Err(OpError::Conflict(format!("'{name}' is the last admin")));
    }
    db::delete_user(&console.db, name).await?;
    Ok(())
}

/// What a new API token asks for: its name, its role (None: its creator's), how many days
/// it lasts (None: until revoked) and the one tenant it is for (None: the whole appliance).
#[derive(Clone, Copy)]
pub struct TokenRequest<'a> {
    pub name: &'a str,
    pub role: Option<&'a str>,
    pub expires_in_days: Option<i64>,
    pub tenant: Option<&'a str>,
}

/// A new API token made by `creator` (who acts with `creator_role`): its role is at most the
/// creator's (the creator's by default), and it expires after `expires_in_days` (none: never).
/// Answers (id, token — shown once, role, expiry, tenant).
pub async fn new_token(
    console: &Console,
    creator: &str,
    creator_role: crate::auth::Role,
    asked: &TokenRequest<'_>,
) -> Result<(i64, String, crate::auth::Role, Option<i64>, Option<String>), OpError> {
    let TokenRequest { name, role, expires_in_days, tenant } = *asked;
    let name = name.trim();
    if name.is_empty() || name.len() > 64 {
        return Err(OpError::Invalid("name: 1-64 characters".into()));
    }
    let role = match role.map(str::trim).filter(|r| !r.is_empty()) {
        None => creator_role,
        Some(r) => crate::auth::Role::parse(r).ok_or_else(|| OpError::Invalid(format!("role: '{r}' is not one of {}", crate::auth::Role::NAMES.join(", "))))?,
    };
    if role > creator_role {
        return Err(OpError::Invalid(format!("role: {creator} has the {} role and cannot make a token with the {} role", creator_role.name(), role.name())));
    }
    let expires_at = match expires_in_days {
        None => None,
        Some(d @ 1..=3650) => Some(db::now() + d * 86_400),
        Some(d) => return Err(OpError::Invalid(format!("expires_in_days: {d} is not from 1 to 3650"))),
    };
    let tenant = scope_of(console, tenant, role).await?;
    let new = db::NewToken { name, role: role.name(), expires_at, created_by: creator, tenant: tenant.as_deref() };
    let (id, token) = crate::auth::create_token(&console.db, &new).await?;
    Ok((id, token, role, expires_at, tenant))
}

/// "Snapshot now": every engine of the slot map, and every replica, starts a snapshot
/// (`BGSAVE`). Answers each engine's reply, or why it could not (one saving already, down).
pub async fn snapshot_now(console: &Console) -> Result<Vec<(String, Result<String, String>)>, OpError> {
    let (engines, _) = db::topology(&console.db).await?;
    let replicas = db::replicas(&console.db).await?;
    let all: Vec<String> = engines.into_iter().chain(replicas.into_iter().map(|(a, _)| a)).collect();
    let started = all.iter().map(|addr| async move {
        let reply = async {
            let mut n = Node::engine(addr, &console.config.engine_auth).await?;
            n.run::<String>(&["BGSAVE"]).await
        }
        .await;
        (addr.clone(), reply.map_err(|e| e.to_string()))
    });
    Ok(futures_util::future::join_all(started).await)
}

/// Starts retraining the tenant's dictionary on every engine (one after another, each
/// waiting for its run); answers the run's id. Progress is kept in the database.
pub async fn retrain(console: &Arc<Console>, name: &str) -> Result<i64, OpError> {
    let t = tenant(console, name).await?;
    if t.compression == "none" {
        return Err(OpError::Invalid(format!("tenant '{name}' has compression none: choose a codec before retraining")));
    }
    if db::last_retrain(&console.db, name).await?.is_some_and(|r| r.status == "running") {
        return Err(OpError::Conflict(format!("a retraining run of tenant '{name}' is already running")));
    }
    let (engines, _) = db::topology(&console.db).await?;
    let id = db::start_retrain(&console.db, name, engines.len()).await?;
    let console = console.clone();
    let name = name.to_string();
    tokio::spawn(async move {
        let mut result = serde_json::Map::new();
        let mut ok = 0;
        for (i, addr) in engines.iter().enumerate() {
            let run = async {
                let mut n = Node::engine_waiting(addr, &console.config.engine_auth, Duration::from_secs(150)).await?;
                n.json(&["TERRACE.RETRAIN", &name, "SYNC"]).await
            }
            .await;
            let entry = match run {
                Ok(stats) => {
                    ok += 1;
                    json!({"generation": stats["generation"], "trained_ratio": stats["trained_ratio"], "sample_values": stats["sample_values"]})
                }
                Err(e) => json!({"error": e.to_string()}),
            };
            result.insert(addr.clone(), entry);
            let status = if i + 1 < engines.len() {
                "running"
            } else if ok > 0 {
                "done"
            } else {
                "failed"
            };
            if let Err(e) = db::retrain_progress(&console.db, id, i + 1, &Value::Object(result.clone()), status).await {
                tracing::warn!(error = %e, "cannot record retraining progress");
            }
        }
        let message = format!("tenant {name}: retraining {id} {} on {ok} of {} engines", if ok > 0 { "done" } else { "failed" }, engines.len());
        if let Err(e) = db::add_event(&console.db, "retrain", &message).await {
            tracing::warn!(error = %e, "cannot record an event");
        }
    });
    Ok(id)
}

/// Per engine: the tenant's workload (`TERRACE.WORKLOAD`) and compression state.
pub async fn engine_stats(console: &Console, name: &str) -> Result<Value, OpError> {
    tenant(console, name).await?;
    let (engines, _) = db::topology(&console.db).await?;
    let mut out = serde_json::Map::new();
    for addr in &engines {
        let got = async {
            let mut n = Node::engine(addr, &console.config.engine_auth).await?;
            let workload = n.json(&["TERRACE.WORKLOAD", name]).await?;
            let compression = n.json(&["TERRACE.COMPRESSION", "STATS", name]).await?;
            Ok::<_, crate::nodes::NodeError>(json!({"workload": workload, "compression": compression}))
        }
        .await;
        out.insert(addr.clone(), got.unwrap_or_else(|e| json!({"error": e.to_string()})));
    }
    Ok(Value::Object(out))
}

/// The advisor's answer for the whole tenant: (which engines, `TERRACE.ADVISE`, the summed
/// `TERRACE.WORKLOAD`).
pub async fn advice(console: &Console, name: &str) -> Result<(String, Value, Value), OpError> {
    advice_from(console, name, None).await
}

/// The advisor's answer: over every engine of the tenant (each engine's share of its workload
/// summed, then costed as one on the first engine — `TERRACE.ADVISE … TOTAL`), or for
/// engine `only` alone (its index in the slot map). Either way with the last recommendation,
/// which the advisor keeps unless another configuration is materially cheaper (hysteresis);
/// the whole tenant's recommendation is recorded as the next one's incumbent.
pub async fn advice_from(console: &Console, name: &str, only: Option<usize>) -> Result<(String, Value, Value), OpError> {
    tenant(console, name).await?;
    let (engines, _) = db::topology(&console.db).await?;
    let engines: Vec<String> = match only {
        Some(i) => vec![engines.get(i).cloned().ok_or_else(|| OpError::NotFound(format!("no engine {i} (the slot map has {})", engines.len())))?],
        None => engines,
    };
    let previous = db::last_recommendation(&console.db, name).await?;
    let ask = |addr: String, total: Option<String>| {
        let previous = previous.clone();
        async move {
            let mut n = Node::engine(&addr, &console.config.engine_auth).await?;
            let mut args = vec!["TERRACE.ADVISE".to_string(), name.to_string()];
            if let Some(t) = total {
                args.extend(["TOTAL".to_string(), t]);
            }
            if let Some(p) = previous {
                args.extend(["PREVIOUS".to_string(), p]);
            }
            let argv: Vec<&str> = args.iter().map(String::as_str).collect();
            let advise = n.json(&argv).await?;
            let workload = n.json(&["TERRACE.WORKLOAD", name]).await?;
            Ok::<_, crate::nodes::NodeError>((advise, workload))
        }
    };
    let mut shares = Vec::new();
    let mut errors = Vec::new();
    for addr in &engines {
        match ask(addr.clone(), None).await {
            Ok((a, w)) => shares.push((addr.clone(), a, w)),
            Err(e) => errors.push(format!("engine {addr}: {e}")),
        }
    }
    if shares.is_empty() {
        return Err(OpError::Unavailable(format!("no engine answered: {}", errors.join("; "))));
    }
    if !errors.is_empty() && only.is_none() {
        // A share missing would be costed as the whole: no advice rather than a wrong one.
        return Err(OpError::Unavailable(format!("the advisor needs every engine's share of the tenant: {}", errors.join("; "))));
    }
    let (addr, advise, workload) = if shares.len() == 1 {
        shares.swap_remove(0)
    } else {
        let lives: Vec<&Value> = shares.iter().map(|(_, a, _)| &a["live"]).collect();
        let total = crate::advice::total_live(&lives).to_string();
        let workloads: Vec<&Value> = shares.iter().map(|(_, _, w)| w).collect();
        let workload = crate::advice::total_workload(&workloads);
        let (first, ..) = &shares[0];
        let (advise, _) = ask(first.clone(), Some(total)).await.map_err(|e| OpError::Unavailable(format!("engine {first}: {e}")))?;
        (format!("all {} engines (costed on {first})", shares.len()), advise, workload)
    };
    if only.is_none() {
        if let Some(r) = advise["advice"]["recommended"].as_str() {
            db::record_recommendation(&console.db, name, r).await?;
        }
    }
    Ok((addr, advise, workload))
}

/// Applies one of the advisor's configurations, the one the operator chose by its name (the
/// recommended one when `option` is None): the tenant's compression and storage mode become
/// that configuration's. Refused when the advisor no longer lists it, when the engines
/// cannot run it, or when it is the tenant's configuration already.
pub async fn apply_advice(console: &Console, name: &str, option: Option<&str>) -> Result<(String, Saved), OpError> {
    let (engine, advise, workload) = advice(console, name).await?;
    let view = crate::views::AdvisorView::build(&engine, &advise, &workload);
    let chosen = option.unwrap_or(&view.recommended);
    let Some(row) = view.options.iter().find(|o| o.name == chosen) else {
        return Err(OpError::Invalid(format!("option: the advisor lists no configuration '{chosen}' (it lists {})", view.option_names())));
    };
    if let Some(why) = &row.cannot_run {
        return Err(OpError::Conflict(format!("'{chosen}' cannot run here: {why}")));
    }
    if row.current {
        return Err(OpError::Conflict(format!("tenant '{name}' already runs '{chosen}'")));
    }
    let input = TenantInput { compression: Some(row.compression.clone()), storage_mode: Some(row.storage_mode.clone()), ..Default::default() };
    let saved = update_tenant(console, name, &input).await?;
    Ok((chosen.to_string(), saved))
}
